;; wasi: guests granted the minimal WASI profile that abuse it. Every
;; callback is (x: f32[n]) -> f32[n].
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open" (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (memory (export "memory") 64)
  (global $heap (mut i32) (i32.const 0x380000))
  ;; A clock subscription (48 bytes at 1024): userdata 0, tag 0 (clock),
  ;; clock id 1 (monotonic), timeout 10^12 ns (about 17 minutes), flags 0.
  (data (i32.const 1024) "\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\01\00\00\00\00\00\00\00\00\10\a5\d4\e8\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00")
  ;; iovecs at 2048: {ptr 0x1000, len 3 MiB}, and one pointing outside memory.
  (data (i32.const 2048) "\00\10\00\00\00\00\30\00")
  (data (i32.const 2056) "\00\00\00\ff\00\01\00\00")
  (data (i32.const 3000) "/etc/passwd")
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
  (func $copy (param $f i32)
    (memory.copy (call $data (local.get $f) (i32.const 1)) (call $data (local.get $f) (i32.const 0))
                 (call $len (local.get $f) (i32.const 0))))

  (func (export "ok") (param $f i32) (result i32) (call $copy (local.get $f)) (i32.const 0))

  ;; sleep_forever: poll_oneoff on a 17-minute clock subscription.
  (func (export "sleep_forever") (param $f i32) (result i32)
    (drop (call $poll (i32.const 1024) (i32.const 1536) (i32.const 1) (i32.const 1600)))
    (call $copy (local.get $f)) (i32.const 0))
  ;; stdout_flood: writes 3 MiB to stdout without a newline, 100 times.
  (func (export "stdout_flood") (param $f i32) (result i32)
    (local $i i32)
    (memory.fill (i32.const 0x1000) (i32.const 0x42) (i32.const 0x300000))
    (loop $l
      (drop (call $fd_write (i32.const 1) (i32.const 2048) (i32.const 1) (i32.const 1600)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 100))))
    (call $copy (local.get $f)) (i32.const 0))
  ;; stdout_iovec_oob: an iovec pointing outside memory.
  (func (export "stdout_iovec_oob") (param $f i32) (result i32)
    (drop (call $fd_write (i32.const 2) (i32.const 2056) (i32.const 1) (i32.const 1600)))
    (call $copy (local.get $f)) (i32.const 0))
  ;; iovecs_huge: claims 2^29 iovecs.
  (func (export "iovecs_huge") (param $f i32) (result i32)
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 0x20000000) (i32.const 1600)))
    (call $copy (local.get $f)) (i32.const 0))
  ;; clock_result_oob: clock_time_get writing its result outside memory.
  (func (export "clock_result_oob") (param $f i32) (result i32)
    (drop (call $clock (i32.const 0) (i64.const 0) (i32.const -4)))
    (call $copy (local.get $f)) (i32.const 0))
  ;; random_huge: random_get over its whole 4 MiB memory: allowed, and
  ;; tramples its own frame, which the host notices.
  (func (export "random_huge") (param $f i32) (result i32)
    (drop (call $random (i32.const 0) (i32.mul (memory.size) (i32.const 65536))))
    (i32.const 0))
  ;; open_file: path_open on /etc/passwd must be refused (EBADF): the guest
  ;; returns FAILED_PRECONDITION when it is, and would succeed otherwise.
  (func (export "open_file") (param $f i32) (result i32)
    (if (i32.eqz (call $open (i32.const 3) (i32.const 0) (i32.const 3000) (i32.const 11) (i32.const 0) (i64.const -1) (i64.const -1) (i32.const 0) (i32.const 1600)))
      (then (call $copy (local.get $f)) (return (i32.const 0))))
    (i32.const 9))
  ;; exit: proc_exit(3) in the middle of a call.
  (func (export "exit") (param $f i32) (result i32)
    (call $exit (i32.const 3)) (i32.const 0))
)
