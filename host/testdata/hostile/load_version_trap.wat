;; load_version_trap: callbox_abi_version traps.
(module
  (memory (export "memory") 1)
  (func (export "callbox_abi_version") (result i32) (i32.div_u (i32.const 1) (i32.const 0)))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
