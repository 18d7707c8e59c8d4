;; alloc_unaligned: callbox_alloc ignores the alignment it is asked for.
(module
  (memory (export "memory") 1)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1028))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
