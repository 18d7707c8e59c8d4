;; testkit: a hand-written ABI v1 guest used by the host's tests. Every
;; export is a callback (frame: i32) -> i32 that reads the frame as the ABI
;; specifies; some are well-behaved, some break the rules on purpose.
(module
  (import "callbox" "error" (func $error (param i32 i32)))
  (import "callbox" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (global $counter (mut i32) (i32.const 0))
  (data (i32.const 64) "negative factor")
  (data (i32.const 96) "scaling")

  (func (export "callbox_abi_version") (result i32) (i32.const 1))

  ;; Bump allocator: never frees, grows memory as needed.
  (func $alloc (export "callbox_alloc") (param $size i32) (param $align i32) (result i32)
    (local $p i32) (local $end i32) (local $need i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
                           (i32.sub (i32.const 0) (local.get $align))))
    (local.set $end (i32.add (local.get $p) (local.get $size)))
    (local.set $need (i32.sub (i32.shr_u (i32.add (local.get $end) (i32.const 65535)) (i32.const 16)) (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (if (i32.eq (memory.grow (local.get $need)) (i32.const -1)) (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))

  ;; Descriptor field readers: tensor k of the frame.
  (func $desc (param $frame i32) (param $k i32) (result i32)
    (i32.add (i32.load offset=16 (local.get $frame)) (i32.mul (local.get $k) (i32.const 32))))
  (func $data (param $frame i32) (param $k i32) (result i32)
    (i32.load offset=16 (call $desc (local.get $frame) (local.get $k))))
  (func $len (param $frame i32) (param $k i32) (result i32)
    (i32.load offset=20 (call $desc (local.get $frame) (local.get $k))))

  ;; scale = (x: f32[n], factor: f32[]) -> f32[n]
  (func (export "scale") (param $f i32) (result i32)
    (local $in i32) (local $out i32) (local $n i32) (local $i i32) (local $k f32)
    (local.set $in (call $data (local.get $f) (i32.const 0)))
    (local.set $k (f32.load (call $data (local.get $f) (i32.const 1))))
    (local.set $out (call $data (local.get $f) (i32.const 2)))
    (local.set $n (call $len (local.get $f) (i32.const 0)))
    (if (f32.lt (local.get $k) (f32.const 0))
      (then (call $error (i32.const 64) (i32.const 15)) (return (i32.const 3))))
    (global.set $counter (i32.add (global.get $counter) (i32.const 1)))
    (block $done (loop $l
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (f32.store (i32.add (local.get $out) (local.get $i))
        (f32.mul (f32.load (i32.add (local.get $in) (local.get $i))) (local.get $k)))
      (local.set $i (i32.add (local.get $i) (i32.const 4)))
      (br $l)))
    (i32.const 0))

  ;; calls = () -> s32[]: how many scale calls this instance served.
  (func (export "calls") (param $f i32) (result i32)
    (i32.store (call $data (local.get $f) (i32.const 0)) (global.get $counter))
    (i32.const 0))

  ;; tap = (x: f32[n]) -> $x: logs and passes its input through.
  (func (export "tap") (param $f i32) (result i32)
    (call $log (i32.const 1) (i32.const 96) (i32.const 7))
    (i32.const 0))

  ;; spin = (x: f32[n]) -> f32[n]: never returns.
  (func (export "spin") (param $f i32) (result i32)
    (loop $l (br $l)) (i32.const 0))

  ;; bad_status = (x: f32[n]) -> f32[n]: returns a status the ABI lacks.
  (func (export "bad_status") (param $f i32) (result i32) (i32.const 77))

  ;; overrun = (x: f32[n]) -> f32[n]: writes 4 bytes past its output.
  (func (export "overrun") (param $f i32) (result i32)
    (i32.store (i32.add (call $data (local.get $f) (i32.const 1)) (call $len (local.get $f) (i32.const 1)))
               (i32.const -1))
    (i32.const 0))

  ;; redirect = (x: f32[n]) -> f32[n]: points its output descriptor at its input.
  (func (export "redirect") (param $f i32) (result i32)
    (i32.store offset=16 (call $desc (local.get $f) (i32.const 1)) (call $data (local.get $f) (i32.const 0)))
    (i32.const 0))

  ;; half_then_trap = (x: f32[n]) -> f32[n]: writes half its output, then traps.
  (func (export "half_then_trap") (param $f i32) (result i32)
    (memory.fill (call $data (local.get $f) (i32.const 1)) (i32.const 0x7f)
                 (i32.shr_u (call $len (local.get $f) (i32.const 1)) (i32.const 1)))
    unreachable)

  ;; bad_error_ptr = (x: f32[n]) -> f32[n]: passes an out-of-range pointer to callbox.error.
  (func (export "bad_error_ptr") (param $f i32) (result i32)
    (call $error (i32.const -8) (i32.const 64)) (i32.const 3))

  ;; grow = (x: f32[n]) -> f32[n]: grows memory page by page until refused, then traps.
  (func (export "grow") (param $f i32) (result i32)
    (loop $l (br_if $l (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
    unreachable)
;; busy = (n: s32[]) -> s32[]: n rounds of an LCG, a loop-heavy kernel
  ;; with no calls and no memory traffic, to measure interruption cost.
  (func (export "busy") (param $f i32) (result i32)
    (local $n i32) (local $x i32)
    (local.set $n (i32.load (call $data (local.get $f) (i32.const 0))))
    (local.set $x (i32.const 1))
    (block $done (loop $l
      (br_if $done (i32.le_s (local.get $n) (i32.const 0)))
      (local.set $x (i32.add (i32.mul (local.get $x) (i32.const 1103515245)) (i32.const 12345)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br $l)))
    (i32.store (call $data (local.get $f) (i32.const 1)) (local.get $x))
    (i32.const 0))
)
