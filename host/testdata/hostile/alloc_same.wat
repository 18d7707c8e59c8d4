;; alloc_same: callbox_alloc returns the same 64-byte-aligned address every
;; time, so a second live block (a session tensor and the call frame)
;; would overlap the first. The host must refuse the second answer, never
;; hand the caller the frame's bytes as its tensor.
(module
  (memory (export "memory") 4)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 65536))
  ;; run copies input 0 to output 0 as a well-behaved guest would.
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
