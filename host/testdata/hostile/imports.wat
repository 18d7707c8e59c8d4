;; imports: guests that abuse callbox.error and callbox.log. Every callback
;; is (x: f32[n]) -> f32[n]. Memory is 64 pages (4 MiB), so "megabytes of
;; text" fit inside it.
(module
  (import "callbox" "error" (func $error (param i32 i32)))
  (import "callbox" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 64)
  (global $heap (mut i32) (i32.const 0x380000))
  (data (i32.const 0) "bad input")
  (data (i32.const 16) "\ff\fe invalid \c3\28 utf-8 \ed\a0\80")
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
  ;; fill: 3 MiB of 'A' from address 0x1000, the "megabytes of text".
  (func $fill (memory.fill (i32.const 0x1000) (i32.const 0x41) (i32.const 0x300000)))

  (func (export "ok") (param $f i32) (result i32) (call $copy (local.get $f)) (i32.const 0))

  ;; error_ptr_oob: a message pointer 8 bytes from the top of the 4 GiB space.
  (func (export "error_ptr_oob") (param $f i32) (result i32)
    (call $error (i32.const -8) (i32.const 64)) (i32.const 3))
  ;; error_len_huge: a valid pointer with a length of 2^32-1.
  (func (export "error_len_huge") (param $f i32) (result i32)
    (call $error (i32.const 0) (i32.const -1)) (i32.const 3))
  ;; error_len_wraps: pointer + length wraps around 2^32 to a small number.
  (func (export "error_len_wraps") (param $f i32) (result i32)
    (call $error (i32.const 0x100) (i32.const 0xffffff00)) (i32.const 3))
  ;; error_ptr_end: a zero-length message exactly at the end of memory is
  ;; fine; one byte further is not.
  (func (export "error_ptr_past_end") (param $f i32) (result i32)
    (call $error (i32.mul (memory.size) (i32.const 65536)) (i32.const 0))
    (call $error (i32.add (i32.mul (memory.size) (i32.const 65536)) (i32.const 1)) (i32.const 0))
    (i32.const 3))
  ;; error_megabytes: a 3 MiB error message, then INVALID_ARGUMENT.
  (func (export "error_megabytes") (param $f i32) (result i32)
    (call $fill) (call $error (i32.const 0x1000) (i32.const 0x300000)) (i32.const 3))
  ;; error_many: sets the error message 1,000 times (3 MiB each, 3 GB in
  ;; all), then fails: the last one wins, each costs the host only its cap.
  (func (export "error_many") (param $f i32) (result i32)
    (local $i i32)
    (call $fill)
    (loop $l
      (call $error (i32.const 0x1000) (i32.const 0x300000))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 1000))))
    (call $error (i32.const 0) (i32.const 9))
    (i32.const 3))
  ;; error_invalid_utf8: a message that is not UTF-8.
  (func (export "error_invalid_utf8") (param $f i32) (result i32)
    (call $error (i32.const 16) (i32.const 27)) (i32.const 3))
  ;; error_then_ok: sets a message, then succeeds (the message is dropped).
  (func (export "error_then_ok") (param $f i32) (result i32)
    (call $error (i32.const 0) (i32.const 9)) (call $copy (local.get $f)) (i32.const 0))
  ;; error_then_trap: sets a message, then hits a memory fault: the trap
  ;; keeps its kind and carries the message.
  (func (export "error_then_trap") (param $f i32) (result i32)
    (call $error (i32.const 0) (i32.const 9)) (i32.load (i32.const -4)))
  ;; log_ptr_oob, log_len_huge: log lines outside memory.
  (func (export "log_ptr_oob") (param $f i32) (result i32)
    (call $log (i32.const 1) (i32.const -8) (i32.const 64)) (call $copy (local.get $f)) (i32.const 0))
  (func (export "log_len_huge") (param $f i32) (result i32)
    (call $log (i32.const 2) (i32.const 0x1000) (i32.const -1)) (call $copy (local.get $f)) (i32.const 0))
  ;; log_megabytes: one 3 MiB log line, then success.
  (func (export "log_megabytes") (param $f i32) (result i32)
    (call $fill) (call $log (i32.const 1) (i32.const 0x1000) (i32.const 0x300000)) (call $copy (local.get $f)) (i32.const 0))
  ;; log_bad_levels: levels -5 and 1000 (clamped), then success.
  (func (export "log_bad_levels") (param $f i32) (result i32)
    (call $log (i32.const -5) (i32.const 0) (i32.const 9))
    (call $log (i32.const 1000) (i32.const 0) (i32.const 9))
    (call $copy (local.get $f)) (i32.const 0))
)
