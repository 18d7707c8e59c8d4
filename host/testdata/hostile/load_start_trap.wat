;; load_start_trap: its start function recurses until the stack overflows.
(module
  (memory (export "memory") 1)
  (func $start (call $start))
  (start $start)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
