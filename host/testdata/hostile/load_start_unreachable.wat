;; load_start_unreachable: its start function executes unreachable. Both
;; engines must report it as Unreachable at load.
(module
  (memory (export "memory") 1)
  (func $start unreachable)
  (start $start)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
