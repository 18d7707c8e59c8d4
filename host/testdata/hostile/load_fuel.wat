;; load_fuel: a start function and an _initialize that each run about ten
;; million instructions, and a callback that copies its input with a
;; handful. Loading must not spend the callback's fuel budget (a small
;; one), which bounds each call only.
(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (func $work (local $i i32)
    (loop $l (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 1000000)))))
  (start $work)
  (func (export "_initialize") (call $work))
  (func (export "callbox_abi_version") (result i32) (call $work) (i32.const 1))
  (func (export "callbox_alloc") (param $size i32) (param $align i32) (result i32)
    (local $p i32)
    (call $work)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
                           (i32.sub (i32.const 0) (local.get $align))))
    (global.set $heap (i32.add (local.get $p) (local.get $size)))
    (local.get $p))
  (func $desc (param $f i32) (param $k i32) (result i32)
    (i32.add (i32.load offset=16 (local.get $f)) (i32.mul (local.get $k) (i32.const 32))))
  (func (export "run") (param $f i32) (result i32)
    (memory.copy (i32.load offset=16 (call $desc (local.get $f) (i32.const 1)))
                 (i32.load offset=16 (call $desc (local.get $f) (i32.const 0)))
                 (i32.load offset=20 (call $desc (local.get $f) (i32.const 0))))
    (i32.const 0))
)
