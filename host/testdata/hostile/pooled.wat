;; pooled: guests that succeed on their first call and sabotage their own
;; instance for the next one. Every callback is (x: f32[n]) -> f32[n]; the
;; tests call each twice on one pooled instance, the second time with a
;; larger input when the host must grow its scratch region.
(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (global $state (mut i32) (i32.const 1024))
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
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
  (func $desc (param $f i32) (param $k i32) (result i32)
    (i32.add (i32.load offset=16 (local.get $f)) (i32.mul (local.get $k) (i32.const 32))))
  (func $data (param $f i32) (param $k i32) (result i32) (i32.load offset=16 (call $desc (local.get $f) (local.get $k))))
  (func $len (param $f i32) (param $k i32) (result i32) (i32.load offset=20 (call $desc (local.get $f) (local.get $k))))
  (func $copy (param $f i32)
    (memory.copy (call $data (local.get $f) (i32.const 1)) (call $data (local.get $f) (i32.const 0))
                 (call $len (local.get $f) (i32.const 0))))

  ;; corrupt_heap: succeeds, and leaves its allocator's heap pointer just
  ;; below 4 GiB; the next allocation returns an address outside memory.
  (func (export "corrupt_heap") (param $f i32) (result i32)
    (call $copy (local.get $f))
    (global.set $heap (i32.const 0xffffff00))
    (i32.const 0))
  ;; corrupt_state: succeeds once, and leaves a pointer it dereferences on
  ;; every later call pointing outside memory.
  (func (export "corrupt_state") (param $f i32) (result i32)
    (drop (i32.load (global.get $state)))
    (call $copy (local.get $f))
    (global.set $state (i32.const -16))
    (i32.const 0))
)
