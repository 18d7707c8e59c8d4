;; noabort: what AssemblyScript emits when the SDK's abort hook is not
;; used: an env.abort import beside a valid callback module, signatures
;; from the callbox_signatures export.
(module
  (import "env" "abort" (func $abort (param i32 i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 64) "\2c\00\00\00scale = (x: f32[n], factor: f32[]) -> f32[n]")
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 0))
  (func (export "callbox_signatures") (result i32) (i32.const 64))
  (func (export "scale") (param i32) (result i32)
    (call $abort (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))
    (i32.const 0)))
