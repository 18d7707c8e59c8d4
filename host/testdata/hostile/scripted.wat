;; scripted: a guest whose misbehaviour is driven by its first input, for
;; FuzzGuest. run = (script: u8[k], x: f32[n]) -> f32[n]. The script is a
;; sequence of ops, one byte each (the low nibble) followed by its
;; operands; an op whose operands run past the script's end ends it with
;; status 0. Offsets marked "frame" are relative to the call frame.
;;
;;   0 END s8               return the status
;;   1 COPY                 output := x
;;   2 POKE s16 u8          store a byte at frame+offset
;;   3 OVERRUN u8           store 0xAA at output end + u8 (the guard, or past it)
;;   4 ERROR u32 u32        callbox.error(ptr, len), raw
;;   5 ERROR_FRAME s16 u16  callbox.error(frame+offset, len)
;;   6 LOG u8 s16 u16       callbox.log(level-1, frame+offset, len)
;;   7 TRAP                 unreachable
;;   8 GROW u8              memory.grow one page at a time, u8 times, until refused
;;   9 SPIN u8              u8*1000 loop iterations (at most 10^6 per call in all)
;;  10 FILL u8              fill the output with the byte
;;  11 RECURSE u8           recurse u8*8 deep and return
;;  12 LOG_RAW u32 u32      callbox.log(1, ptr, len), raw
;;  13 SPIN_FOREVER 0xa5    loop forever (with any other operand: nothing)
;;  14 DIV u8               1 / u8
;;  15 RECURSE_FOREVER 0xa5 infinite recursion (with any other operand: nothing)
(module
  (import "callbox" "error" (func $error (param i32 i32)))
  (import "callbox" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (global $spun (mut i32) (i32.const 0))
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
  (func $recurse (param $d i32) (result i32)
    (if (result i32) (i32.eqz (local.get $d))
      (then (i32.const 0))
      (else (i32.add (call $recurse (i32.sub (local.get $d) (i32.const 1))) (i32.const 1)))))
  (func $forever (param $d i32) (result i32)
    (i32.add (call $forever (i32.add (local.get $d) (i32.const 1))) (i32.const 1)))

  (func (export "run") (param $f i32) (result i32)
    (local $pc i32) (local $end i32) (local $op i32) (local $out i32) (local $n i32) (local $k i32)
    (local.set $pc (call $data (local.get $f) (i32.const 0)))
    (local.set $end (i32.add (local.get $pc) (call $len (local.get $f) (i32.const 0))))
    (local.set $out (call $data (local.get $f) (i32.const 2)))
    (local.set $n (call $len (local.get $f) (i32.const 2)))
    (global.set $spun (i32.const 0))
    (loop $next
      (if (i32.ge_u (local.get $pc) (local.get $end)) (then (return (i32.const 0))))
      (local.set $op (i32.and (i32.load8_u (local.get $pc)) (i32.const 15)))
      (local.set $pc (i32.add (local.get $pc) (i32.const 1)))
      ;; 0 END s8
      (if (i32.eq (local.get $op) (i32.const 0)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 1)) (local.get $end)) (then (return (i32.const 0))))
        (return (i32.load8_s (local.get $pc)))))
      ;; 1 COPY
      (if (i32.eq (local.get $op) (i32.const 1)) (then
        (memory.copy (local.get $out) (call $data (local.get $f) (i32.const 1)) (local.get $n))))
      ;; 2 POKE s16 u8
      (if (i32.eq (local.get $op) (i32.const 2)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 3)) (local.get $end)) (then (return (i32.const 0))))
        (i32.store8 (i32.add (local.get $f) (i32.load16_s (local.get $pc))) (i32.load8_u offset=2 (local.get $pc)))
        (local.set $pc (i32.add (local.get $pc) (i32.const 3)))))
      ;; 3 OVERRUN u8
      (if (i32.eq (local.get $op) (i32.const 3)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 1)) (local.get $end)) (then (return (i32.const 0))))
        (i32.store8 (i32.add (i32.add (local.get $out) (local.get $n)) (i32.load8_u (local.get $pc))) (i32.const 0xaa))
        (local.set $pc (i32.add (local.get $pc) (i32.const 1)))))
      ;; 4 ERROR u32 u32
      (if (i32.eq (local.get $op) (i32.const 4)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 8)) (local.get $end)) (then (return (i32.const 0))))
        (call $error (i32.load (local.get $pc)) (i32.load offset=4 (local.get $pc)))
        (local.set $pc (i32.add (local.get $pc) (i32.const 8)))))
      ;; 5 ERROR_FRAME s16 u16
      (if (i32.eq (local.get $op) (i32.const 5)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 4)) (local.get $end)) (then (return (i32.const 0))))
        (call $error (i32.add (local.get $f) (i32.load16_s (local.get $pc))) (i32.load16_u offset=2 (local.get $pc)))
        (local.set $pc (i32.add (local.get $pc) (i32.const 4)))))
      ;; 6 LOG u8 s16 u16
      (if (i32.eq (local.get $op) (i32.const 6)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 5)) (local.get $end)) (then (return (i32.const 0))))
        (call $log (i32.sub (i32.load8_u (local.get $pc)) (i32.const 1))
                   (i32.add (local.get $f) (i32.load16_s offset=1 (local.get $pc))) (i32.load16_u offset=3 (local.get $pc)))
        (local.set $pc (i32.add (local.get $pc) (i32.const 5)))))
      ;; 7 TRAP
      (if (i32.eq (local.get $op) (i32.const 7)) (then unreachable))
      ;; 8 GROW u8
      (if (i32.eq (local.get $op) (i32.const 8)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 1)) (local.get $end)) (then (return (i32.const 0))))
        (local.set $k (i32.load8_u (local.get $pc)))
        (block $done (loop $g
          (br_if $done (i32.eqz (local.get $k)))
          (br_if $done (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
          (local.set $k (i32.sub (local.get $k) (i32.const 1)))
          (br $g)))
        (local.set $pc (i32.add (local.get $pc) (i32.const 1)))))
      ;; 9 SPIN u8
      (if (i32.eq (local.get $op) (i32.const 9)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 1)) (local.get $end)) (then (return (i32.const 0))))
        (local.set $k (i32.mul (i32.load8_u (local.get $pc)) (i32.const 1000)))
        (block $done (loop $s
          (br_if $done (i32.eqz (local.get $k)))
          (br_if $done (i32.ge_u (global.get $spun) (i32.const 1000000)))
          (global.set $spun (i32.add (global.get $spun) (i32.const 1)))
          (local.set $k (i32.sub (local.get $k) (i32.const 1)))
          (br $s)))
        (local.set $pc (i32.add (local.get $pc) (i32.const 1)))))
      ;; 10 FILL u8
      (if (i32.eq (local.get $op) (i32.const 10)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 1)) (local.get $end)) (then (return (i32.const 0))))
        (memory.fill (local.get $out) (i32.load8_u (local.get $pc)) (local.get $n))
        (local.set $pc (i32.add (local.get $pc) (i32.const 1)))))
      ;; 11 RECURSE u8
      (if (i32.eq (local.get $op) (i32.const 11)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 1)) (local.get $end)) (then (return (i32.const 0))))
        (drop (call $recurse (i32.mul (i32.load8_u (local.get $pc)) (i32.const 8))))
        (local.set $pc (i32.add (local.get $pc) (i32.const 1)))))
      ;; 12 LOG_RAW u32 u32
      (if (i32.eq (local.get $op) (i32.const 12)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 8)) (local.get $end)) (then (return (i32.const 0))))
        (call $log (i32.const 1) (i32.load (local.get $pc)) (i32.load offset=4 (local.get $pc)))
        (local.set $pc (i32.add (local.get $pc) (i32.const 8)))))
      ;; 13 SPIN_FOREVER 0xa5
      (if (i32.eq (local.get $op) (i32.const 13)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 1)) (local.get $end)) (then (return (i32.const 0))))
        (if (i32.eq (i32.load8_u (local.get $pc)) (i32.const 0xa5)) (then (loop $l (br $l))))
        (local.set $pc (i32.add (local.get $pc) (i32.const 1)))))
      ;; 14 DIV u8
      (if (i32.eq (local.get $op) (i32.const 14)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 1)) (local.get $end)) (then (return (i32.const 0))))
        (drop (i32.div_u (i32.const 1) (i32.load8_u (local.get $pc))))
        (local.set $pc (i32.add (local.get $pc) (i32.const 1)))))
      ;; 15 RECURSE_FOREVER 0xa5
      (if (i32.eq (local.get $op) (i32.const 15)) (then
        (if (i32.gt_u (i32.add (local.get $pc) (i32.const 1)) (local.get $end)) (then (return (i32.const 0))))
        (if (i32.eq (i32.load8_u (local.get $pc)) (i32.const 0xa5)) (then (drop (call $forever (i32.const 0)))))
        (local.set $pc (i32.add (local.get $pc) (i32.const 1)))))
      (br $next))
    (i32.const 0))
)
