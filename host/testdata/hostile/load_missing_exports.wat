;; load_missing_exports: neither callbox_alloc nor the callback "run" nor
;; the memory is exported.
(module
  (memory 1)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "rn") (param i32) (result i32) (i32.const 0))
)
