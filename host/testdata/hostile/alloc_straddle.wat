;; alloc_straddle: callbox_alloc returns an aligned address 64 bytes before
;; the end of memory, so the region it promises runs past the end.
(module
  (memory (export "memory") 1)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 65472))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
