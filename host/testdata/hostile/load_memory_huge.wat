;; load_memory_huge: declares an initial memory of 65536 pages (4 GiB).
(module
  (memory (export "memory") 65536)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
