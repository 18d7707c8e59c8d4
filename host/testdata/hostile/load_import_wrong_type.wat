;; load_import_wrong_type: imports callbox.error with a type the host's
;; function does not have.
(module
  (import "callbox" "error" (func $error (param i64) (result i32)))
  (memory (export "memory") 1)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (call $error (i64.const 0)))
)
