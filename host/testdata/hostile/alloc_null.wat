;; alloc_null: callbox_alloc always fails (returns 0).
(module
  (memory (export "memory") 1)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 0))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
