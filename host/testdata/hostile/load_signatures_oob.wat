;; load_signatures_oob: callbox_signatures returns a pointer outside memory.
(module
  (memory (export "memory") 1)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "callbox_signatures") (result i32) (i32.const 0xfffffffe))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
