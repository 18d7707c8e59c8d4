;; load_initialize_loop: its _initialize export never returns.
(module
  (memory (export "memory") 1)
  (func (export "_initialize") (loop $l (br $l)))
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
