;; runaway: guests that never finish on their own, or try to take more than
;; their limits allow. Every callback is (x: f32[n]) -> f32[n]; "ok" is the
;; well-behaved baseline (it copies x to the output).
(module
  (import "callbox" "error" (func $error (param i32 i32)))
  (import "callbox" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  (table $t 1 funcref)
  (global $heap (mut i32) (i32.const 4096))
  (global $sink (mut i32) (i32.const 0))
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

  (func (export "ok") (param $f i32) (result i32)
    (memory.copy (call $data (local.get $f) (i32.const 1)) (call $data (local.get $f) (i32.const 0))
                 (call $len (local.get $f) (i32.const 0)))
    (i32.const 0))

  ;; spin: an infinite loop.
  (func (export "spin") (param $f i32) (result i32)
    (loop $l (br $l)) (i32.const 0))

  ;; recurse: infinite recursion.
  (func $recurse (export "recurse") (param $f i32) (result i32)
    (i32.add (call $recurse (i32.add (local.get $f) (i32.const 1))) (i32.const 1)))

  ;; deep_then_spin: recurses 5000 deep (well inside any stack limit), then
  ;; spins in a loop that makes no calls at all.
  (func $descend (param $depth i32) (result i32)
    (if (i32.eqz (local.get $depth))
      (then (loop $l (global.set $sink (i32.add (global.get $sink) (i32.const 1))) (br $l))))
    (i32.add (call $descend (i32.sub (local.get $depth) (i32.const 1))) (i32.const 1)))
  (func (export "deep_then_spin") (param $f i32) (result i32)
    (drop (call $descend (i32.const 5000))) (i32.const 0))

  ;; grow_pages: memory.grow one page at a time until refused, then traps.
  (func (export "grow_pages") (param $f i32) (result i32)
    (loop $l (br_if $l (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
    unreachable)

  ;; grow_huge: asks for 16384 pages (1 GiB) at once; when refused it reports
  ;; RESOURCE_EXHAUSTED.
  (func (export "grow_huge") (param $f i32) (result i32)
    (if (i32.ne (memory.grow (i32.const 16384)) (i32.const -1)) (then (return (i32.const 0))))
    (i32.const 8))

  ;; grow_then_exhausted: grows to the limit page by page, then returns
  ;; RESOURCE_EXHAUSTED as an allocator that ran out would.
  (func (export "grow_then_exhausted") (param $f i32) (result i32)
    (loop $l (br_if $l (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
    (i32.const 8))

  ;; table_grow: asks for 2^31 table elements (16 GiB of host memory on an
  ;; engine without a table limit); traps with unreachable when refused.
  (func (export "table_grow") (param $f i32) (result i32)
    (if (i32.ne (table.grow $t (ref.null func) (i32.const 0x7ffffff0)) (i32.const -1)) (then (return (i32.const 0))))
    unreachable)

  ;; log_flood: 100,000 log lines of 64 bytes (6.4 MB) in one call; the host
  ;; keeps max_log bytes and counts the rest.
  (func (export "log_flood") (param $f i32) (result i32)
    (local $i i32)
    (loop $l
      (call $log (i32.const 1) (i32.const 0) (i32.const 64))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 100000))))
    (memory.copy (call $data (local.get $f) (i32.const 1)) (call $data (local.get $f) (i32.const 0))
                 (call $len (local.get $f) (i32.const 0)))
    (i32.const 0))

  ;; log_forever: calls callbox.log in an endless loop: the host-call path
  ;; must honour the timeout too.
  (func (export "log_forever") (param $f i32) (result i32)
    (loop $l (call $log (i32.const 0) (i32.const 0) (i32.const 8)) (br $l))
    (i32.const 0))
)
