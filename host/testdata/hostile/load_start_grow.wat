;; load_start_grow: its start function grows memory until refused, then
;; traps.
(module
  (memory (export "memory") 1)
  (func $start (loop $l (br_if $l (i32.ne (memory.grow (i32.const 1)) (i32.const -1)))) unreachable)
  (start $start)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
