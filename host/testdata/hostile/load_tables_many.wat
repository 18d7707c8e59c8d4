;; load_tables_many: four tables of 900,000 elements each, every one below
;; the per-table limit, together four times over it.
(module
  (memory (export "memory") 1)
  (table 900000 funcref)
  (table 900000 funcref)
  (table 900000 funcref)
  (table 900000 funcref)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
