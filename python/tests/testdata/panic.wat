;; What a callbox SDK does on a panic (guests/rust: the panic hook passes
;; the message to callbox.error, then panic=abort traps), and what a module
;; without an SDK does (a bare trap).
(module
  (import "callbox" "error" (func $error (param i32 i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (data (i32.const 64) "panicked at src/lib.rs:7:5: index out of bounds")

  (func (export "callbox_abi_version") (result i32) (i32.const 1))

  (func (export "callbox_alloc") (param $size i32) (param $align i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
                           (i32.sub (i32.const 0) (local.get $align))))
    (global.set $heap (i32.add (local.get $p) (local.get $size)))
    (local.get $p))

  (func (export "sdk_panic") (param $f i32) (result i32)
    (call $error (i32.const 64) (i32.const 47))
    unreachable)

  (func (export "bare_trap") (param $f i32) (result i32)
    unreachable))
