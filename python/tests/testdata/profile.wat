;; ratio = () -> (): light runs its loop n times and heavy 9n, each
;; iteration calling the leaf mix. test_profile checks that Host.profile
;; shows the 1:9 ratio (fuel is counted per instruction, alike on both
;; engines). Built with wat2wasm --debug-names, so the functions are named.
(module
  (memory (export "memory") 1)
  (global $sink (mut i32) (i32.const 0))
  (func (export "callbox_abi_version") (result i32) i32.const 1)
  (func (export "callbox_alloc") (param i32 i32) (result i32) i32.const 1024)
  (func $mix (param $x i32) (result i32)
    (i32.xor (i32.mul (local.get $x) (i32.const 2654435761)) (i32.shr_u (local.get $x) (i32.const 7))))
  (func $light (param $n i32)
    (loop $l
      (global.set $sink (i32.add (global.get $sink) (call $mix (local.get $n))))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n))))
  (func $heavy (param $n i32)
    (local.set $n (i32.mul (local.get $n) (i32.const 9)))
    (loop $l
      (global.set $sink (i32.add (global.get $sink) (call $mix (local.get $n))))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n))))
  (func (export "ratio") (param i32) (result i32)
    (call $light (i32.const 20000))
    (call $heavy (i32.const 20000))
    i32.const 0))
