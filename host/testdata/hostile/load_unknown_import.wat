;; load_unknown_import: imports env.system, which the host does not provide.
(module
  (import "env" "system" (func $system (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (call $system (i32.const 0)))
)
