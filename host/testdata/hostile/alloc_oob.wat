;; alloc_oob: callbox_alloc returns an address 64 bytes below 4 GiB, far
;; outside its one-page memory.
(module
  (memory (export "memory") 1)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 0xffffffc0))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
