;; load_start_log: calls callbox.log from its start function and from
;; _initialize, with a message in its own memory (a data segment). Valid:
;; the host's imports see the instance's memory during both, on both
;; engines, and the module loads.
(module
  (import "callbox" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "hello start")
  (func $start (call $log (i32.const 1) (i32.const 16) (i32.const 11)))
  (start $start)
  (func (export "_initialize") (call $log (i32.const 1) (i32.const 16) (i32.const 5)))
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
