;; hostile: callbacks that misbehave on purpose, for `callbox demo` and the
;; containment tests. Each follows the ABI far enough to be called.
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param $size i32) (param $align i32) (result i32)
    (local $p i32) (local $end i32) (local $need i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
                           (i32.sub (i32.const 0) (local.get $align))))
    (local.set $end (i32.add (local.get $p) (local.get $size)))
    (local.set $need (i32.sub (i32.shr_u (i32.add (local.get $end) (i32.const 65535)) (i32.const 16)) (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (if (i32.eq (memory.grow (local.get $need)) (i32.const -1)) (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))

  ;; spin = (x: f32[n]) -> f32[n]: an infinite loop.
  (func (export "spin") (param $f i32) (result i32)
    (loop $l (br $l)) (i32.const 0))

  ;; hog = (x: f32[n]) -> f32[n]: grows memory until refused, then aborts.
  (func (export "hog") (param $f i32) (result i32)
    (loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
    unreachable)

  ;; scribble = (x: f32[n]) -> f32[n]: fills its output and 64 bytes beyond.
  (func (export "scribble") (param $f i32) (result i32)
    (local $d i32)
    (local.set $d (i32.add (i32.load offset=16 (local.get $f)) (i32.const 32)))
    (memory.fill (i32.load offset=16 (local.get $d)) (i32.const 0x41)
                 (i32.add (i32.load offset=20 (local.get $d)) (i32.const 64)))
    (i32.const 0))
)
