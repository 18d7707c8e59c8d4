;; load_wrong_signatures: the callback takes two parameters, callbox_alloc
;; returns i64, callbox_abi_version takes a parameter, callbox_free is a
;; global.
(module
  (memory (export "memory") 1)
  (global (export "callbox_free") i32 (i32.const 0))
  (func (export "callbox_abi_version") (param i32) (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i64) (i64.const 1024))
  (func (export "run") (param i32 i32) (result i32) (i32.const 0))
)
