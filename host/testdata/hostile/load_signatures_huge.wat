;; load_signatures_huge: callbox_signatures claims a 4 GiB table.
(module
  (memory (export "memory") 1)
  (data (i32.const 256) "\ff\ff\ff\ff")
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "callbox_signatures") (result i32) (i32.const 256))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
