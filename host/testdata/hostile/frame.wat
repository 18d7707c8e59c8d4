;; frame: guests that lie to the host through the call frame. Every callback
;; is (x: f32[n]) -> f32[n] and (except where it breaks the frame first)
;; fills its output with x * 2, so a result that got through would be
;; visibly wrong. Descriptor 0 is the input, descriptor 1 the output.
(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
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

  ;; double: output = 2 * input, as a well-behaved callback would.
  (func $double (param $f i32)
    (local $in i32) (local $out i32) (local $i i32) (local $n i32)
    (local.set $in (call $data (local.get $f) (i32.const 0)))
    (local.set $out (call $data (local.get $f) (i32.const 1)))
    (local.set $n (call $len (local.get $f) (i32.const 0)))
    (block $done (loop $l
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (f32.store (i32.add (local.get $out) (local.get $i))
        (f32.mul (f32.load (i32.add (local.get $in) (local.get $i))) (f32.const 2)))
      (local.set $i (i32.add (local.get $i) (i32.const 4)))
      (br $l))))
  (func (export "ok") (param $f i32) (result i32) (call $double (local.get $f)) (i32.const 0))

  ;; overrun_1: a correct output, then one byte past its end.
  (func (export "overrun_1") (param $f i32) (result i32)
    (call $double (local.get $f))
    (i32.store8 (i32.add (call $data (local.get $f) (i32.const 1)) (call $len (local.get $f) (i32.const 1))) (i32.const 0x55))
    (i32.const 0))
  ;; overrun_last_guard: writes only the 64th byte after the output, the
  ;; last byte the host guards.
  (func (export "overrun_last_guard") (param $f i32) (result i32)
    (call $double (local.get $f))
    (i32.store8 offset=63 (i32.add (call $data (local.get $f) (i32.const 1)) (call $len (local.get $f) (i32.const 1))) (i32.const 0))
    (i32.const 0))
  ;; overrun_far: fills 1 MiB after its output (through the guard and past
  ;; the frame into the rest of its memory).
  (func (export "overrun_far") (param $f i32) (result i32)
    (call $double (local.get $f))
    (memory.fill (call $data (local.get $f) (i32.const 1)) (i32.const 0x41)
      (i32.add (call $len (local.get $f) (i32.const 1)) (i32.const 0x10000)))
    (i32.const 0))
  ;; redirect: points the output descriptor at the input buffer.
  (func (export "redirect") (param $f i32) (result i32)
    (call $double (local.get $f))
    (i32.store offset=16 (call $desc (local.get $f) (i32.const 1)) (call $data (local.get $f) (i32.const 0)))
    (i32.const 0))
  ;; redirect_host: points the output descriptor at address 0xfffff000.
  (func (export "redirect_host") (param $f i32) (result i32)
    (call $double (local.get $f))
    (i32.store offset=16 (call $desc (local.get $f) (i32.const 1)) (i32.const 0xfffff000))
    (i32.store offset=20 (call $desc (local.get $f) (i32.const 1)) (i32.const 0x1000))
    (i32.const 0))
  ;; rank_huge: sets the output's rank to 2^32-1.
  (func (export "rank_huge") (param $f i32) (result i32)
    (call $double (local.get $f))
    (i32.store offset=4 (call $desc (local.get $f) (i32.const 1)) (i32.const -1))
    (i32.const 0))
  ;; dim_negative: sets the output's first dimension to -1.
  (func (export "dim_negative") (param $f i32) (result i32)
    (call $double (local.get $f))
    (i64.store (i32.load offset=8 (call $desc (local.get $f) (i32.const 1))) (i64.const -1))
    (i32.const 0))
  ;; byte_len_huge: sets the output's byte length to 2^32-1.
  (func (export "byte_len_huge") (param $f i32) (result i32)
    (call $double (local.get $f))
    (i32.store offset=20 (call $desc (local.get $f) (i32.const 1)) (i32.const -1))
    (i32.const 0))
  ;; outputs_more: claims 1000 outputs in the frame header.
  (func (export "outputs_more") (param $f i32) (result i32)
    (call $double (local.get $f))
    (i32.store offset=12 (local.get $f) (i32.const 1000))
    (i32.const 0))
  ;; magic: rewrites the frame magic.
  (func (export "magic") (param $f i32) (result i32)
    (call $double (local.get $f))
    (i32.store (local.get $f) (i32.const 0))
    (i32.const 0))
  ;; descriptors_moved: points the header's descriptor array elsewhere.
  (func (export "descriptors_moved") (param $f i32) (result i32)
    (call $double (local.get $f))
    (i32.store offset=16 (local.get $f) (i32.const 8))
    (i32.const 0))
  ;; write_then_trap: writes its whole output, then traps.
  (func (export "write_then_trap") (param $f i32) (result i32)
    (call $double (local.get $f))
    unreachable)
  ;; write_then_bad_status: writes its whole output, then returns 77.
  (func (export "write_then_bad_status") (param $f i32) (result i32)
    (call $double (local.get $f))
    (i32.const 77))
  ;; status_negative: writes its output, then returns -1.
  (func (export "status_negative") (param $f i32) (result i32)
    (call $double (local.get $f))
    (i32.const -1))
  ;; status_cancelled: absl CANCELLED (1), which ABI v1 does not define.
  (func (export "status_cancelled") (param $f i32) (result i32)
    (call $double (local.get $f))
    (i32.const 1))
  ;; scribble_inputs: overwrites its input buffer after reading it, and
  ;; succeeds: the caller's input must not change.
  (func (export "scribble_inputs") (param $f i32) (result i32)
    (call $double (local.get $f))
    (memory.fill (call $data (local.get $f) (i32.const 0)) (i32.const 0x5a) (call $len (local.get $f) (i32.const 0)))
    (i32.const 0))
)
