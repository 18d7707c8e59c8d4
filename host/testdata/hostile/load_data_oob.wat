;; load_data_oob: an active data segment past the end of its memory.
(module
  (memory (export "memory") 1)
  (data (i32.const 65534) "overflow")
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
