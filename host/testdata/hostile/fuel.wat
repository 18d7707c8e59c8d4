;; fuel: guests that do megabytes of work per instruction or per import
;; call, under a small fuel budget. Fuel charges bulk operations and
;; byte-scanning imports by size (docs/SECURITY.md), so each stops with
;; FuelExhausted long before its work is done. Every callback is
;; (x: f32[n]) -> f32[n].
(module
  (import "callbox" "error" (func $error (param i32 i32)))
  (import "callbox" "log" (func $log (param i32 i32 i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (memory (export "memory") 130)
  (table $t 100000 funcref)
  (global $heap (mut i32) (i32.const 4096))
  (func $f)
  (elem declare func $f)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param $size i32) (param $align i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
                           (i32.sub (i32.const 0) (local.get $align))))
    (global.set $heap (i32.add (local.get $p) (local.get $size)))
    (local.get $p))

  ;; fill_flood: 2,000 memory.fill of 8 MiB each (16 GB of writes).
  (func (export "fill_flood") (param $f i32) (result i32)
    (local $i i32)
    (loop $l
      (memory.fill (i32.const 65536) (i32.const 7) (i32.const 0x800000))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 2000))))
    (i32.const 0))

  ;; copy_flood: 4,000 memory.copy of 4 MiB each.
  (func (export "copy_flood") (param $f i32) (result i32)
    (local $i i32)
    (loop $l
      (memory.copy (i32.const 65536) (i32.const 0x420000) (i32.const 0x400000))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 4000))))
    (i32.const 0))

  ;; table_flood: fills a 100,000-element table a million times.
  (func (export "table_flood") (param $f i32) (result i32)
    (local $i i32)
    (loop $l
      (table.fill $t (i32.const 0) (ref.func $f) (i32.const 100000))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 1000000))))
    (i32.const 0))

  ;; grow_flood: grows memory one page at a time, within max_memory.
  (func (export "grow_flood") (param $f i32) (result i32)
    (local $i i32)
    (loop $l
      (drop (memory.grow (i32.const 1)))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 100))))
    (i32.const 0))

  ;; error_flood: sets a 4 MiB error message a million times.
  (func (export "error_flood") (param $f i32) (result i32)
    (local $i i32)
    (loop $l
      (call $error (i32.const 65536) (i32.const 0x400000))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 1000000))))
    (i32.const 0))

  ;; random_flood: random_get over 8 MiB, 2,000 times.
  (func (export "random_flood") (param $f i32) (result i32)
    (local $i i32)
    (loop $l
      (drop (call $random_get (i32.const 65536) (i32.const 0x800000)))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 2000))))
    (i32.const 0))
)
