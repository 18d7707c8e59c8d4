;; load_table_huge: declares a table of 10 million elements.
(module
  (memory (export "memory") 1)
  (table 10000000 funcref)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
