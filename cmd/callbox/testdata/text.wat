;; text: callbacks for the CLI tests. copy and pass work on any dtype (the
;; config gives the signature); the others try to forge the CLI's output
;; with guest-controlled text: terminal escapes (clear screen, colours, a
;; window title), newlines followed by a fake "ok" line, carriage return,
;; backspace, C1 CSI and bidirectional overrides, through callbox.error,
;; callbox.log, WASI stdout and stderr, and an export name.
(module
  (import "callbox" "error" (func $error (param i32 i32)))
  (import "callbox" "log" (func $log (param i32 i32 i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  ;; The hostile text, 79 bytes at 256.
  (data (i32.const 256) "\1b[2J\1b[31mPWNED\1b[0m\0acallbox: callback \"scale\" ok\0d\08\08\c2\9b31m\e2\80\aeevil\e2\80\ac\1b]0;title\07 end")
  ;; An iovec at 128: {ptr 256, len 79}.
  (data (i32.const 128) "\00\01\00\00\4f\00\00\00")
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func $alloc (export "callbox_alloc") (param $size i32) (param $align i32) (result i32)
    (local $p i32) (local $end i32) (local $need i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
                           (i32.sub (i32.const 0) (local.get $align))))
    (local.set $end (i32.add (local.get $p) (local.get $size)))
    (local.set $need (i32.sub (i32.shr_u (i32.add (local.get $end) (i32.const 65535)) (i32.const 16)) (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (if (i32.eq (memory.grow (local.get $need)) (i32.const -1)) (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))
  (func $desc (param $f i32) (param $k i32) (result i32)
    (i32.add (i32.load offset=16 (local.get $f)) (i32.mul (local.get $k) (i32.const 32))))
  (func $data (param $f i32) (param $k i32) (result i32) (i32.load offset=16 (call $desc (local.get $f) (local.get $k))))
  (func $len (param $f i32) (param $k i32) (result i32) (i32.load offset=20 (call $desc (local.get $f) (local.get $k))))

  ;; copy: output 0 = input 0, byte for byte (any dtype, same shape).
  (func (export "copy") (param $f i32) (result i32)
    (memory.copy (call $data (local.get $f) (i32.const 1)) (call $data (local.get $f) (i32.const 0))
                 (call $len (local.get $f) (i32.const 0)))
    (i32.const 0))
  ;; pass: a pass-through (signature "(x: T) -> $x"); logs one plain line.
  (func (export "pass") (param $f i32) (result i32)
    (call $log (i32.const 1) (i32.const 96) (i32.const 9))
    (i32.const 0))
  (data (i32.const 96) "saw input")
  ;; evil_error: fails with the hostile text as its message.
  (func (export "evil_error") (param $f i32) (result i32)
    (call $error (i32.const 256) (i32.const 79))
    (i32.const 3))
  ;; evil_log: logs the hostile text at info, then succeeds (pass-through).
  (func (export "evil_log") (param $f i32) (result i32)
    (call $log (i32.const 1) (i32.const 256) (i32.const 79))
    (i32.const 0))
  ;; evil_stdout: writes the hostile text to WASI stdout and stderr.
  (func (export "evil_stdout") (param $f i32) (result i32)
    (drop (call $fd_write (i32.const 1) (i32.const 128) (i32.const 1) (i32.const 192)))
    (drop (call $fd_write (i32.const 2) (i32.const 128) (i32.const 1) (i32.const 192)))
    (i32.const 0))
  ;; An export whose name tries the same, shown by inspect.
  (func (export "name\1b[2J\0acallbox: forged\e2\80\ae") (param $f i32) (result i32) (i32.const 0))
)
