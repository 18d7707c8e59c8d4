;; load_signatures_loop: callbox_signatures never returns.
(module
  (memory (export "memory") 1)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "callbox_signatures") (result i32) (loop $l (br $l)) (i32.const 0))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
