;; load_import_memory: imports its memory and a global instead of defining
;; them.
(module
  (import "env" "memory" (memory 1))
  (import "env" "secret" (global i32))
  (export "memory" (memory 0))
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
