;; load_reserved_export: exports a name the host's load-time
;; instrumentation reserves, which would keep the module from being
;; metered on wazero.
(module
  (memory (export "memory") 1)
  (global (export "callbox_meter_budget") i32 (i32.const 0))
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0))
)
