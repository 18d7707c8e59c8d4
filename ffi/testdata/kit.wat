;; kit: the FFI tests' guest. Its callbacks are dtype-agnostic (they move
;; bytes), so one export serves many signatures given in the config.
(module
  (import "callbox" "error" (func $error (param i32 i32)))
  (import "callbox" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (global $counter (mut i32) (i32.const 0))
  (data (i32.const 64) "bad input")
  (data (i32.const 96) "hello from kit")

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

  (func $desc (param $f i32) (param $k i32) (result i32)
    (i32.add (i32.load offset=16 (local.get $f)) (i32.mul (local.get $k) (i32.const 32))))
  (func $data (param $f i32) (param $k i32) (result i32)
    (i32.load offset=16 (call $desc (local.get $f) (local.get $k))))
  (func $len (param $f i32) (param $k i32) (result i32)
    (i32.load offset=20 (call $desc (local.get $f) (local.get $k))))
  (func $inputs (param $f i32) (result i32) (i32.load offset=8 (local.get $f)))

  ;; copy = (x: T[...]) -> T[...]: output 0 is input 0, byte for byte.
  (func (export "copy") (param $f i32) (result i32)
    (memory.copy (call $data (local.get $f) (i32.const 1))
                 (call $data (local.get $f) (i32.const 0))
                 (call $len (local.get $f) (i32.const 0)))
    (i32.const 0))

  ;; copy2 = (x: T[...], y: U[...]) -> (T[...], U[...]): both through.
  (func (export "copy2") (param $f i32) (result i32)
    (memory.copy (call $data (local.get $f) (i32.const 2))
                 (call $data (local.get $f) (i32.const 0))
                 (call $len (local.get $f) (i32.const 0)))
    (memory.copy (call $data (local.get $f) (i32.const 3))
                 (call $data (local.get $f) (i32.const 1))
                 (call $len (local.get $f) (i32.const 1)))
    (i32.const 0))

  ;; fail = (x: f32[n]) -> f32[n]: reports "bad input", INVALID_ARGUMENT.
  (func (export "fail") (param $f i32) (result i32)
    (call $error (i32.const 64) (i32.const 9))
    (i32.const 3))

  ;; bump = (x: f32[n]) -> s32[]: counts the calls this instance served.
  (func (export "bump") (param $f i32) (result i32)
    (global.set $counter (i32.add (global.get $counter) (i32.const 1)))
    (i32.store (call $data (local.get $f) (i32.const 1)) (global.get $counter))
    (i32.const 0))

  ;; say = (x: T[...]) -> T[...]: logs "hello from kit" at info, then copies.
  (func (export "say") (param $f i32) (result i32)
    (call $log (i32.const 1) (i32.const 96) (i32.const 14))
    (memory.copy (call $data (local.get $f) (i32.const 1))
                 (call $data (local.get $f) (i32.const 0))
                 (call $len (local.get $f) (i32.const 0)))
    (i32.const 0))

  ;; nonneg = (x: f32[n]) -> f32[n]: copies; reports "bad input",
  ;; INVALID_ARGUMENT, when x[0] is negative (a batch's failing element).
  (func (export "nonneg") (param $f i32) (result i32)
    (if (f32.lt (f32.load (call $data (local.get $f) (i32.const 0))) (f32.const 0))
      (then (call $error (i32.const 64) (i32.const 9)) (return (i32.const 3))))
    (memory.copy (call $data (local.get $f) (i32.const 1))
                 (call $data (local.get $f) (i32.const 0))
                 (call $len (local.get $f) (i32.const 0)))
    (i32.const 0))

  ;; spin = (x: f32[n]) -> f32[n]: never returns.
  (func (export "spin") (param $f i32) (result i32)
    (loop $l (br $l)) (i32.const 0))
)
