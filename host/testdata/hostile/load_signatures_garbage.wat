;; load_signatures_garbage: callbox_signatures points at text that is not a
;; signature table (binary junk with a valid length).
(module
  (memory (export "memory") 1)
  (data (i32.const 256) "\10\00\00\00run = (\00\ff\fe[[[->")
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "callbox_signatures") (result i32) (i32.const 256))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
