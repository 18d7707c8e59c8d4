;; load_memory_shared: a shared memory, and a second memory.
(module
  (memory (export "memory") 1 1 shared)
  (memory 1)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
