;; load_elem_oob: an active element segment past the end of its table.
(module
  (memory (export "memory") 1)
  (table 2 funcref)
  (elem (i32.const 1) $f $f $f)
  (func $f)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
