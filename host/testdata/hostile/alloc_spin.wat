;; alloc_spin: loads (the load-time probe never allocates), but its
;; callbox_alloc loops forever, so the first call hangs while the host asks
;; for its scratch region.
(module
  (memory (export "memory") 1)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (loop $l (br $l)) (i32.const 0))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
