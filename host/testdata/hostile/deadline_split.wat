;; deadline_split: spends 150 ms (0.6x the hostile suite's 250 ms timeout)
;; in each of _initialize, callbox_alloc and the callback, busy-waiting on
;; the WASI monotonic clock. With fresh isolation one host call enters the
;; guest three times; with a deadline re-armed at every entry the call
;; would succeed after 450 ms, each entry within "its" timeout. One
;; deadline per call stops it at 250 ms, in callbox_alloc. (The load-time
;; probe runs _initialize only: 150 ms, well within its deadline even on a
;; loaded machine; 0.6x rather than 0.9x keeps that margin.)
(module
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (memory (export "memory") 1)
  (func $now (result i64)
    (drop (call $clock (i32.const 1) (i64.const 0) (i32.const 8)))
    (i64.load (i32.const 8)))
  (func $busy (local $end i64)
    (local.set $end (i64.add (call $now) (i64.const 150000000)))
    (loop $l (br_if $l (i64.lt_u (call $now) (local.get $end)))))
  (func (export "_initialize") (call $busy))
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (call $busy) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (call $busy) (i32.const 0))
)
