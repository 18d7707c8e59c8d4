/*
 * callbox.h - the C API of libcallbox, version 1.13.
 *
 * libcallbox runs untrusted tensor callbacks (WebAssembly modules) in
 * sandboxes with hard limits, for any runtime with a C FFI: a C or C++
 * program, Python (ctypes), an Elixir NIF, and XLA itself through the
 * XLA FFI handlers callbox_xla_ffi (CPU) and callbox_xla_ffi_cuda (GPU),
 * and GPU tensors through callbox_cuda_call_dlpack (see the end of this
 * file).
 *
 * This header is the contract; it is written by hand and versioned. The
 * header cgo generates while building the library is not.
 *
 * Conventions
 *  - Every function that can fail returns a callbox_error*: NULL on
 *    success, else an error the caller owns and frees with
 *    callbox_error_free. Failures inside the callback, calls on a closed
 *    host, and every argument the library can check come back as errors
 *    naming the argument or the callback (kind INVALID_ARGUMENT unless
 *    said otherwise): NULL pointers, unknown dtypes, rank above
 *    CALLBOX_MAX_RANK, negative dimensions, sizes that overflow, strides
 *    that are not row-major, wrong counts, mismatched shapes, and data
 *    pointers that cannot be valid (NULL for a non-empty tensor, inside
 *    the lowest 64 KiB of the address space, which Linux never maps, past
 *    2^57, where user space has ended on every 64-bit Linux (the kernel
 *    half, non-canonical addresses), or data + byte_offset + size past the
 *    end of the address space).
 *  - What the caller must guarantee, as for memcpy: a tensor's data
 *    addresses its whole size (dtype size x elements) of readable memory
 *    for an input and writable memory for an output, for the duration of
 *    the call; shape and strides point at ndim int64s; strings are
 *    NUL-terminated. The library cannot check these without reading the
 *    memory: a wild pointer into unmapped memory faults inside the copy
 *    and the Go runtime aborts the process (it cannot recover such a
 *    fault), and one into mapped memory reads or writes the wrong bytes.
 *  - Every function may be called from any thread, many at once,
 *    including threads the Go runtime did not create. wasmtime runs a
 *    guest on a native stack, and needs the callback's max_stack (default
 *    512 KiB) plus about 1 MiB of it. On Linux with glibc (any
 *    architecture; since 1.4 on x86-64, since 1.10 elsewhere) and on
 *    x86-64 Linux with any libc, a call (and the instantiation a call may
 *    make, which runs start functions) whose thread has less room than
 *    that below its frame runs on a stack the library keeps for that
 *    thread (reserved on first need, at least 16 MiB and max_stack plus
 *    1 MiB, committed only as touched, unmapped when the thread ends), so
 *    a thread with a small stack (an Erlang scheduler's 320 KB to 1 MB)
 *    may call a callback with any max_stack. Elsewhere (musl off x86-64,
 *    other systems) the calling thread needs that room itself
 *    (callbox_callback_limits' caller_stack says how much): on Linux a
 *    call from a thread known to be short of it is refused before the
 *    guest runs (STACK_OVERFLOW, naming the thread's room and the need,
 *    since 1.10); where the library cannot read a thread's stack bounds,
 *    overflowing it kills the process with SIGSEGV. Opening a host compiles wasmtime
 *    modules on the calling thread: give it a default-sized stack. wazero
 *    guests run on Go's own stacks. A call blocks its thread until it is
 *    done, or until a cancel token it was made with
 *    fires (callbox_call_cancelable); callbox_call_async (since 1.3)
 *    returns at once and runs the call on a thread of the library's.
 *  - fork(): the library contains the Go runtime, which does not survive
 *    fork() (its threads are not copied). In a child forked from a process
 *    that had loaded the library, every function returns at once, without
 *    entering Go, an error of kind FAILED_PRECONDITION naming the fix: use
 *    the library in processes started by spawn or forkserver (Python's
 *    multiprocessing.get_context("spawn")), or load it only after forking.
 *    The XLA handlers fail the same way; callbox_dtypes returns 0 and
 *    callbox_cuda_stats -1. callbox_error_free works in such a child.
 *  - Strings passed in are NUL-terminated UTF-8 and are not retained.
 *  - Tensors are dense, row-major and on the CPU (GPU tensors: the CUDA
 *    section at the end). Inputs are read and
 *    outputs written in place (one copy into the sandbox, one copy out);
 *    a failed call writes no output byte.
 *  - Signals: the Go runtime (when the library loads) and wasmtime (when
 *    the first wasmtime host opens) install handlers for SIGSEGV, SIGBUS,
 *    SIGFPE (and wasmtime SIGILL), keeping the program's and chaining to
 *    them; wasm traps on wasmtime arrive as these signals. Asynchronous
 *    signals (SIGINT, SIGTERM, SIGUSR1, ...) stay the program's, with two
 *    exceptions of the Go runtime's: SIGURG gets a handler (goroutine
 *    preemption), chaining to the program's; SIGPIPE left at its default
 *    gets a handler that keeps the default's effect (a write to a closed
 *    pipe on a program thread still ends the process), and an ignored
 *    SIGPIPE stays ignored (the write fails with EPIPE). Install
 *    every handler with SA_ONSTACK, and make a SIGSEGV/SIGBUS/SIGILL/SIGFPE
 *    handler installed after the library loads chain to the one it
 *    replaced for faults it does not own. docs/SECURITY.md ("The same
 *    suite inside a foreign process") has the details and the test.
 */
#ifndef CALLBOX_H
#define CALLBOX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this API. A library accepts a program built against the
 * same major version and a minor version at most its own. What each minor
 * version added, in short (the declarations below give the details):
 *   1.0  the C API and the CPU XLA FFI handler
 *   1.1  the GPU entries (callbox_xla_ffi_cuda, callbox_cuda_call_dlpack,
 *        callbox_cuda_stats)
 *   1.2  one door: one code per failure in both XLA handlers; kinds
 *        UNKNOWN_CALLBACK and FAILED_PRECONDITION; callbox_dtypes; XLA FFI
 *        API 0.2; fork() children refused; cancel tokens;
 *        callbox_set_log_callback
 *   1.3  callbox_call_batch (batch_size, batch_element); batched="true";
 *        callbox_call_async
 *   1.4  callbox_call_within; a stack of the library's for wasmtime guests
 *        called from small-stack threads (x86-64 Linux)
 *   1.5  callbox_callback_limits (caller_stack)
 *   1.6  kind OVERLOADED, callbox_limits.max_wait_ns,
 *        callbox_barrier_cancelable
 *   1.7  callbox_request (run, async); callbox_reload(_config);
 *        max_cpu_ns; callbox_kinds; callbox_callback_params;
 *        callbox_error.failed_text
 *   1.8  kind WORKER_DIED (isolation: process)
 *   1.9  callbox_callback_refusal
 *   1.10 the library's own stack for small-stack callers off x86-64 too;
 *        a caller short of stack is refused (STACK_OVERFLOW), not faulted
 *   1.11 XLA errors end with a token "[callbox error TAG-N]"
 *        (callbox_xla_failure); the XLA attribute host
 *        (callbox_xla_host_attr)
 *   1.12 callbox_error.frames: the guest's frames of a failure inside the
 *        guest (callbox_frame), in the module as its author built it
 *   1.13 callbox_profile (the guest profiler), callbox_string_free */
#define CALLBOX_VERSION_MAJOR 1
#define CALLBOX_VERSION_MINOR 13
#define CALLBOX_VERSION_PATCH 0


/* ---- Tensors: the DLPack DLTensor layout -------------------------------
 *
 * callbox_tensor has exactly the memory layout of DLPack's DLTensor
 * (DLPack 0.8 and later), so a NumPy, PyTorch or CuPy tensor exported
 * through DLPack passes without conversion. Only the layout is shared; the
 * names are callbox's own. */

/* The largest rank callbox accepts. */
#define CALLBOX_MAX_RANK 32

/* Device types (DLDeviceType). The C API calls (callbox_call and the
 * rest) run on host memory: CPU, and CUDA-pinned host memory, which the
 * CPU reads directly. CUDA device and managed memory go through
 * callbox_cuda_call_dlpack (since 1.1), which takes the stream; the other
 * calls refuse them with an error saying so. */
#define CALLBOX_DEVICE_CPU 1
#define CALLBOX_DEVICE_CUDA 2
#define CALLBOX_DEVICE_CUDA_HOST 3
#define CALLBOX_DEVICE_CUDA_MANAGED 13

typedef struct callbox_device {
  int32_t device_type; /* CALLBOX_DEVICE_* */
  int32_t device_id;
} callbox_device;

/* Element type codes (DLDataTypeCode). */
#define CALLBOX_DL_INT 0
#define CALLBOX_DL_UINT 1
#define CALLBOX_DL_FLOAT 2
#define CALLBOX_DL_BFLOAT 4
#define CALLBOX_DL_COMPLEX 5
#define CALLBOX_DL_BOOL 6

/* An element type (DLDataType): code, bits per lane, lanes (always 1).
 * The callbox dtypes and their encodings:
 *   pred  {BOOL, 8}     s8..s64 {INT, 8..64}    u8..u64 {UINT, 8..64}
 *   f16 f32 f64 {FLOAT, 16/32/64}   bf16 {BFLOAT, 16}
 *   c64 {COMPLEX, 64}   c128 {COMPLEX, 128} */
typedef struct callbox_dtype {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} callbox_dtype;

typedef struct callbox_tensor {
  void *data;             /* may be NULL only when the tensor is empty */
  callbox_device device;  /* CALLBOX_DEVICE_CPU (or CUDA_HOST) */
  int32_t ndim;           /* 0..CALLBOX_MAX_RANK; 0 is a scalar */
  callbox_dtype dtype;
  int64_t *shape;         /* ndim dimensions, each >= 0; may be NULL when ndim is 0 */
  int64_t *strides;       /* NULL (row-major), or row-major strides in elements */
  uint64_t byte_offset;   /* added to data */
} callbox_tensor;

/* A tensor type without data, as derived for a callback's results. */
typedef struct callbox_type {
  callbox_dtype dtype;
  int32_t ndim;
  int64_t shape[CALLBOX_MAX_RANK];
} callbox_type;

/* One dtype callbox has, with its encodings (callbox_dtypes, since 1.2). */
typedef struct callbox_dtype_info {
  const char *name;     /* "f32" (static storage) */
  callbox_dtype dlpack; /* its DLPack encoding */
  int32_t xla;          /* its XLA PrimitiveType (= XLA FFI DataType) number */
  uint32_t bytes;       /* bytes per element */
  uint32_t reserved;
} callbox_dtype_info;

/* One failure kind, with its code and name (callbox_kinds, since 1.7):
 * binding layers read codes and names here instead of keeping their own. */
typedef struct callbox_kind_info {
  int32_t kind;     /* CALLBOX_KIND_* */
  int32_t code;     /* the absl / XLA error code of a failure of this kind; a
                     * GuestError's is its guest's status, INTERNAL (this
                     * table's) when that is not an error status */
  const char *name; /* "Timeout" (static storage) */
} callbox_kind_info;

/* One parameter of a callback's signature (callbox_callback_params, since
 * 1.7): binding layers read the parameters here instead of parsing the
 * signature text. */
typedef struct callbox_param_info {
  const char *name; /* "x"; "" when the signature names none (valid until the host closes) */
  int32_t xla;      /* its dtype, as XLA numbers it (callbox_dtype_info.xla) */
  int32_t rank;     /* its number of dimensions */
} callbox_param_info;

/* ---- Errors -------------------------------------------------------------- */

/* Failure kinds. The numbers are stable and are the same as the Go API's
 * abi.Kind. */
#define CALLBOX_KIND_TIMEOUT 1
#define CALLBOX_KIND_FUEL_EXHAUSTED 2
#define CALLBOX_KIND_MEMORY_LIMIT 3
#define CALLBOX_KIND_STACK_OVERFLOW 4
#define CALLBOX_KIND_UNREACHABLE 5
#define CALLBOX_KIND_MEMORY_OUT_OF_BOUNDS 6
#define CALLBOX_KIND_DIVIDE_BY_ZERO 7
#define CALLBOX_KIND_INTEGER_OVERFLOW 8
#define CALLBOX_KIND_INVALID_CONVERSION 9
#define CALLBOX_KIND_TABLE_OUT_OF_BOUNDS 10
#define CALLBOX_KIND_INDIRECT_CALL_MISMATCH 11
#define CALLBOX_KIND_GUEST_ERROR 12
#define CALLBOX_KIND_ABI_VIOLATION 13
#define CALLBOX_KIND_HOST_PANIC 14
#define CALLBOX_KIND_CANCELED 15
#define CALLBOX_KIND_OTHER_TRAP 16
#define CALLBOX_KIND_INVALID_ARGUMENT 17
#define CALLBOX_KIND_UNKNOWN_CALLBACK 18     /* since 1.2 (was INVALID_ARGUMENT) */
#define CALLBOX_KIND_FAILED_PRECONDITION 19  /* since 1.2 (was INVALID_ARGUMENT) */
#define CALLBOX_KIND_OVERLOADED 20           /* since 1.6 (was an unbounded wait) */
#define CALLBOX_KIND_WORKER_DIED 21          /* since 1.8 (isolation: process) */

/* The code of each failure, the same from every entry (callbox_error.code,
 * both XLA handlers' errors, callbox_cuda_call_dlpack's return):
 *   bad argument, tensor, call frame or attribute   INVALID_ARGUMENT (3)
 *   no loaded callback has the name or content id   NOT_FOUND (5)
 *   closed host, no default host, a CUDA handler    FAILED_PRECONDITION (9)
 *     without a stream
 *   timeout                                         DEADLINE_EXCEEDED (4)
 *   fuel or memory limit; overloaded (every         RESOURCE_EXHAUSTED (8)
 *     instance busy for max_wait)
 *   canceled                                        CANCELLED (1)
 *   the guest returned an error status              that status (an absl code)
 *   traps, ABI violations, GPU device failures      INTERNAL (13) */

/* One frame of the guest's stack at a failure inside the guest (since
 * 1.12), in the module as its author built it (the host maps the frames of
 * the module it ran back through its rewrite). Every string is non-NULL
 * (possibly empty), guest-controlled, cut to a few hundred bytes and
 * printable, and owned by the error. */
typedef struct callbox_frame {
  const char *func;    /* function name (name section or DWARF, demangled); "" if none */
  const char *module;  /* the import module, for a frame in an imported function; else "" */
  const char *file;    /* source file from the module's DWARF; "" if unknown */
  uint32_t func_index; /* function index in the module */
  uint32_t line;       /* source line; 0 if unknown */
  uint32_t column;     /* source column; 0 if unknown */
  uint32_t reserved;   /* 0 */
  uint64_t offset;     /* byte offset of the instruction in the module; 0 if unknown */
} callbox_frame;

/* A failure. Every string is non-NULL (possibly empty) and owned by the
 * error. */
typedef struct callbox_error {
  uint32_t struct_size;      /* sizeof(callbox_error) of the library */
  int32_t kind;              /* CALLBOX_KIND_* */
  int32_t code;              /* absl / XLA FFI error code: 4 DEADLINE_EXCEEDED, 8 RESOURCE_EXHAUSTED, ... */
  int32_t guest_status;      /* the ABI status a guest returned (GUEST_ERROR), else 0 */
  uint64_t seq;              /* sequence number in the chain, from 1; 0 outside a chain */
  const char *kind_name;     /* "Timeout", "MemoryLimit", ... */
  const char *callback;      /* callback name; "" when the error concerns no callback */
  const char *chain;         /* chain name; "" outside a chain */
  const char *message;       /* the host's description ("timeout after 50ms") */
  const char *guest_message; /* what the guest reported through callbox.error; "" if nothing */
  const char *text;          /* the whole error as one line, for logs */
  /* Since 1.2 (present when struct_size covers them): for a chain step
   * that did not run because an earlier step of its chain failed, the step
   * that failed (its callback and sequence number; callback and seq above
   * are the step refused, kind and guest_message the failed step's); else
   * "" and 0. */
  const char *failed_callback;
  uint64_t failed_seq;
  const char *failed_message; /* the failed step's host description */
  /* Since 1.3 (present when struct_size covers them): for a batched call
   * (callbox_call_batch) that failed in one of its elements, the batch's
   * size and that element, from 0 (the lowest failing index); else 0 and
   * 0. */
  uint64_t batch_size;
  uint64_t batch_element;
  /* Since 1.7: for a chain step that did not run (failed_seq above), the
   * failed step's whole error as one line, as text is this one's; else
   * "". */
  const char *failed_text;
  /* Since 1.12: for a failure inside the guest (a trap, an abort, a
   * timeout, fuel, memory or stack), its frames, innermost first (at most
   * 64; for a chain step that did not run, the failed step's); else NULL
   * and 0. */
  const callbox_frame *frames;
  uint64_t frame_count;
} callbox_error;


/* ---- Logging (since 1.2) ------------------------------------------------
 *
 * Guest log lines (callbox_log, a WASI guest's stdout and stderr) and the
 * library's own warnings go to stderr at the level CALLBOX_LOG_LEVEL names
 * (debug, info, warn, error; default warn), unless a callback is set: then
 * every line at min_level or above goes to it, from whichever thread logs
 * it (the callback must be thread-safe and must not call back into the
 * library). callback is the callback's name ("" for the library's own
 * lines); message is the line with any further attributes as key=value
 * (a guest's line: the guest's text). The host's warning about a failed
 * call is passed on at level CALLBOX_LOG_DEBUG: the failure is the call's
 * error already. The callback reaches hosts already open. fn NULL
 * restores stderr. */
#define CALLBOX_LOG_DEBUG (-4)
#define CALLBOX_LOG_INFO 0
#define CALLBOX_LOG_WARN 4
#define CALLBOX_LOG_ERROR 8
typedef void (*callbox_log_fn)(void *user, int32_t level, const char *callback, const char *message);

/* ---- Handles and callback descriptions --------------------------------- */

/* A host holds loaded callbacks. Handles are process-wide numbers; 0 is
 * never a valid handle. */
typedef uint64_t callbox_host;

/* A cancel token (since 1.2): a process-wide number, 0 none. */
typedef uint64_t callbox_cancel_token;

/* A loaded callback. The strings are owned by the host and stay valid
 * until callbox_close. */
typedef struct callbox_callback_info {
  const char *name;
  const char *id;        /* content id "cb1-<64 hex>": module bytes, export and signature */
  const char *signature; /* e.g. "(x: f32[n], factor: f32[]) -> f32[n]" */
  const char *engine;    /* "wazero" or "wasmtime" */
  const char *batching;  /* "sequential", "expand_dims", "broadcast_all" or (since 1.3) "parallel" */
  int32_t num_inputs;
  int32_t num_outputs;
} callbox_callback_info;

/* A callback's limits as its host enforces them (since 1.5; config
 * keys in parentheses). Set struct_size to sizeof(callbox_limits) before
 * the call: the library fills the fields that fit in it, writes no byte
 * past it, and sets it to the size it filled (fields a later version
 * appends stay the caller's). */
typedef struct callbox_limits {
  size_t struct_size;
  uint64_t timeout_ns;   /* a call's wall-clock limit (timeout); 0: none */
  uint64_t max_memory;   /* bytes of linear memory (max_memory) */
  uint64_t fuel;         /* work per call (fuel); 0: unlimited */
  uint64_t max_stack;    /* bytes of wasm stack (max_stack); 0: the engine's default */
  uint64_t max_output;   /* bytes of a call's outputs together (max_output) */
  /* Bytes of native stack a thread calling this callback must have: 0
   * when any thread will do (wazero; wasmtime on Linux with glibc or on
   * x86-64 Linux, where the library switches to a stack of its own when
   * the caller's is short), else about max_stack plus 1 MiB (wasmtime
   * elsewhere): call from a thread with that much room below its frame. */
  uint64_t caller_stack;
  /* How long a call waits for an instance while every one is busy
   * (max_wait), then fails as OVERLOADED; 0: no bound (since 1.6). */
  uint64_t max_wait_ns;
  /* The CPU time one call may use (max_cpu), counted on the guest's
   * thread; 0: none (since 1.7). */
  uint64_t max_cpu_ns;
} callbox_limits;

/* ---- A call as a value (since 1.7) -------------------------------------
 *
 * callbox_request is the Go API's host.Request in C: one struct says
 * everything about a call, and callbox_request_run (or its asynchronous
 * twin) runs it. Each call entry above is one of these with some fields
 * fixed: callbox_call (no chain, no token), callbox_chain_call (chain),
 * callbox_call_cancelable (cancel), callbox_call_batch (flags
 * CALLBOX_REQUEST_BATCH), callbox_call_within (budget_ns, no chain).
 * Every term is checked by the library, the same way for every door:
 * budget_ns is at most an hour (config's longest timeout); a batch takes
 * no budget; the outputs have the types callbox_output_types derives.
 *
 * Set size to sizeof(callbox_request). A later minor version appends
 * fields; the library reads the first size bytes, counts the fields past
 * them as 0, and refuses a size shorter than 1.7's or a request whose
 * bytes past the fields it knows are not all 0 (a newer caller's terms
 * that an older library cannot honour are an error, never ignored). */
typedef struct callbox_request {
  size_t size;                 /* sizeof(callbox_request) */
  const char *callback;        /* a name or a content id */
  const char *chain;           /* NULL: an unordered call; else the chain's next step */
  callbox_cancel_token cancel; /* 0: none */
  const callbox_tensor *inputs;
  size_t num_inputs;
  callbox_tensor *outputs; /* caller-allocated, exactly the derived types */
  size_t num_outputs;
  /* 0: none. Else the call stops when budget_ns of wall time passed since
   * it began (waiting for an instance included), with kind TIMEOUT, no
   * output byte written, as callbox_call_within (which reports it as
   * *expired instead of an error). */
  uint64_t budget_ns;
  uint32_t flags;    /* CALLBOX_REQUEST_BATCH, or 0 */
  uint32_t reserved; /* 0 */
} callbox_request;

/* flags: a batched call (callbox_call_batch's rules). */
#define CALLBOX_REQUEST_BATCH 1u

/* The function callbox_call_async reports to (since 1.3): err is NULL on
 * success, else an error the function owns. */
typedef void (*callbox_done_fn)(void *user, callbox_error *err);

/* The XLA FFI call frame and error (opaque here; see callbox_xla_ffi). */
struct callbox_xla_call_frame;
struct callbox_xla_error;

/* ==== Functions ===========================================================
 * (The library's own build defines CALLBOX_BUILDING_LIBRARY: cgo generates
 * its own prototypes for the functions it exports.) */
#ifndef CALLBOX_BUILDING_LIBRARY

/* The library's version as "MAJOR.MINOR.PATCH" (static storage). */
const char *callbox_version(void);
/* The library's version as MAJOR*10000 + MINOR*100 + PATCH. */
uint32_t callbox_version_number(void);

/* Frees an error; NULL is allowed. */
void callbox_error_free(callbox_error *err);

/* Sets (fn NULL: clears) the log callback; see Logging. */
callbox_error *callbox_set_log_callback(callbox_log_fn fn, void *user, int32_t min_level);

/* Writes up to capacity descriptions of the dtypes callbox has into out
 * (NULL with capacity 0 to count) and returns how many there are. Binding
 * layers read the dtype table here instead of keeping one (since 1.2). */
size_t callbox_dtypes(callbox_dtype_info *out, size_t capacity);

/* Writes up to capacity kinds into out (NULL with capacity 0 to count)
 * and returns how many there are, every CALLBOX_KIND_* but NONE, with the
 * code and the name each error of that kind carries (since 1.7). */
size_t callbox_kinds(callbox_kind_info *out, size_t capacity);

/* ---- Hosts ----------------------------------------------------------------- */

/* Opens a host from a configuration file (.yaml, .yml, .toml, .json),
 * applying CALLBOX_ environment overrides, and loads every callback.
 * On success *out is the new handle. */
callbox_error *callbox_open(const char *config_path, callbox_host *out);

/* Opens a host from configuration text: format is "yaml", "json" or
 * "toml"; relative paths are relative to base_dir (NULL: the working
 * directory). */
callbox_error *callbox_open_config(const char *text, const char *format, const char *base_dir,
                                   callbox_host *out);

/* Reloads a host from a configuration file (since 1.7), its CALLBOX_
 * environment overrides read again: callbacks whose module bytes and
 * settings are unchanged keep their loaded modules and warm instances,
 * changed ones are loaded anew and switched atomically, calls in flight
 * finish on the version they started on, named chains carry on. A
 * configuration with any callback that fails to load is refused whole
 * (the error names the file and callback) and the old one keeps serving.
 * Callback infos read before (callbox_callback_at, callbox_callback_find)
 * stay valid until the host is closed; read them again for the new ones.
 * cache_dir is not applied. Reloads of one host are serialized. */
callbox_error *callbox_reload(callbox_host host, const char *config_path);

/* callbox_reload from configuration text, as callbox_open_config. */
callbox_error *callbox_reload_config(callbox_host host, const char *text, const char *format, const char *base_dir);

/* Waits for calls in flight, then releases the host. Later calls with the
 * handle fail with an error saying the host is closed. Closing twice is
 * not an error. */
callbox_error *callbox_close(callbox_host host);

/* ---- Callbacks ------------------------------------------------------------ */


/* The number of loaded callbacks. */
callbox_error *callbox_callback_count(callbox_host host, size_t *out);
/* The callback at index (0 <= index < count; sorted by name). */
callbox_error *callbox_callback_at(callbox_host host, size_t index, callbox_callback_info *out);
/* The callback with this name or content id. An id no loaded callback
 * has is an error saying that the module changed or is not loaded. */
callbox_error *callbox_callback_find(callbox_host host, const char *name_or_id,
                                     callbox_callback_info *out);
/* The limits of the callback with this name or content id (since 1.5):
 * out->struct_size set by the caller, at least the 1.5 size (56 bytes on
 * 64-bit platforms). */
callbox_error *callbox_callback_limits(callbox_host host, const char *name_or_id, callbox_limits *out);

/* Writes up to capacity parameters of the callback's signature into out
 * and their count into *count (since 1.7): names, dtypes and ranks, for
 * binding layers that convert arguments, instead of parsing signatures. */
callbox_error *callbox_callback_params(callbox_host host, const char *name_or_id, callbox_param_info *out,
                                       size_t capacity, size_t *count);

/* The error the library gives a call of this callback that it refuses
 * before running it, for reason: what a binding layer's own check of the
 * call's arguments found (a NumPy cast it will not make, say), worded as
 * the library words its own refusals (kind INVALID_ARGUMENT, naming the
 * callback), so that a binding decides no message (since 1.9). Never
 * NULL: the refusal, or the error finding the callback gave. */
callbox_error *callbox_callback_refusal(callbox_host host, const char *name_or_id, const char *reason);

/* Derives the result types of a call from its inputs' dtypes and shapes
 * (the inputs' data, strides and device are not read). num_outputs must be
 * the callback's result count. Binding layers use this instead of parsing
 * signatures. */
callbox_error *callbox_output_types(callbox_host host, const char *callback,
                                    const callbox_tensor *inputs, size_t num_inputs,
                                    callbox_type *outputs, size_t num_outputs);

/* ---- Calls -----------------------------------------------------------------
 *
 * callback is a name or a content id. outputs are caller-allocated with
 * exactly the derived types (callbox_output_types). */

/* Calls a callback. */
callbox_error *callbox_call(callbox_host host, const char *callback,
                            const callbox_tensor *inputs, size_t num_inputs,
                            callbox_tensor *outputs, size_t num_outputs);

/* ---- The guest profiler (since 1.13) -------------------------------------
 * callbox_profile calls the callback calls times with inputs on a copy of it
 * compiled with the guest profiler (in process; Go's Host.Profile) and
 * writes the profile in pprof's format to pprof_path (NULL: none) and as
 * JSON (the fields of Go's host.GuestProfile: callback, engine, calls,
 * failed, elapsed ns, functions with frame, self and total work: fuel,
 * nanos, calls) to *summary (summary NULL: none), which
 * callbox_string_free frees. It fails when every call failed (the last
 * call's error). */
callbox_error *callbox_profile(callbox_host host, const char *callback,
                               const callbox_tensor *inputs, size_t num_inputs,
                               int64_t calls, const char *pprof_path, char **summary);
/* Frees a string the library returned; NULL is allowed. */
void callbox_string_free(char *s);

/* ---- Cancellation (since 1.2) ------------------------------------------
 *
 * A call made with a cancel token stops when the token fires: the guest is
 * interrupted within milliseconds (both engines), no output byte is
 * written, and the call fails with kind CANCELED (code CANCELLED). Firing
 * a token cancels the calls made with it that are in flight then, and
 * only those: calls made later run, so one token serves a whole session
 * (one per Ctrl-C handler, say). Tokens are safe to use from any thread. */

/* Makes a token. */
callbox_error *callbox_cancel_token_new(callbox_cancel_token *out);
/* Fires a token: its calls in flight fail with CANCELED. */
callbox_error *callbox_cancel_token_fire(callbox_cancel_token cancel);
/* Fires and forgets a token. */
callbox_error *callbox_cancel_token_free(callbox_cancel_token cancel);
/* callbox_call, or callbox_chain_call when chain is not NULL, that stops
 * when cancel fires (0: never, as callbox_call). */
callbox_error *callbox_call_cancelable(callbox_host host, callbox_cancel_token cancel, const char *chain,
                                       const char *callback, const callbox_tensor *inputs, size_t num_inputs,
                                       callbox_tensor *outputs, size_t num_outputs);
/* Makes signal signum (SIGINT, SIGTERM, ...; not SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL, SIGPROF, SIGURG, which the Go runtime and wasmtime own) fire
 * cancel: the library installs a handler (SA_ONSTACK) that fires the token
 * and then calls the handler it replaced (a default action still happens:
 * SIGINT still ends a program that did not handle it). It keeps the
 * replaced handler's SA_RESTART choice and mask (a program whose handler
 * lets Ctrl-C interrupt its blocking reads keeps that), and restarts
 * interrupted calls when the signal was ignored or default. In a fork()
 * child the handler only chains: a signal to the child never fires the
 * parent's token. A program that installs its own handler for signum
 * afterwards replaces the library's; calling this again reinstalls it,
 * chaining to the new one. Python's binding uses it so that Ctrl-C
 * cancels a call in flight. */
callbox_error *callbox_cancel_on_signal(callbox_cancel_token cancel, int signum);

/* A batched call (since 1.3): every input and output has one extra
 * leading dimension of size B over the callback's per-element signature
 * (f32[64,16384] for a parameter f32[n], batch of 64); element i is the
 * call on each input's i-th slice, and writes each output's i-th slice.
 * There is no broadcast: an input the same for every element is given B
 * times. A callback whose batching is "parallel" runs its elements
 * concurrently on pooled instances (at most max_instances, and the
 * cores, at once); any other callback runs them one after another, in
 * order, as does a batch on a chain (chain not NULL: one step of the
 * chain, elements in order). Every element is a whole call: its limits
 * apply to it alone. The lowest failing element fails the call
 * (batch_size and batch_element of the error), elements after it are not
 * run or are canceled, and when the call returns every output byte is as
 * it was (elements that finished wrote their slices; the library puts
 * the saved bytes back, so read no output while the call runs). cancel:
 * a cancel token, or 0 for none. */
callbox_error *callbox_call_batch(callbox_host host, callbox_cancel_token cancel, const char *chain,
                                  const char *callback, const callbox_tensor *inputs, size_t num_inputs,
                                  callbox_tensor *outputs, size_t num_outputs);

/* ---- Calls within a budget (since 1.4) ---------------------------------
 *
 * callbox_call_within is callbox_call_cancelable for an unordered call
 * (no chain) that gives up when budget_ns nanoseconds of wall time (1 ns
 * to one hour) pass before the call is over: the guest is interrupted
 * (within the engine's interrupt latency), no output byte is written, the
 * instance it ran on is discarded (as after any interrupt: a pooled
 * instance's state from earlier calls is lost with it), and the function
 * returns NULL with *expired set to 1. Otherwise *expired is 0 and the
 * result is callbox_call_cancelable's: NULL with the outputs written, or
 * the call's error (a callback whose own timeout is shorter than the
 * budget fails with TIMEOUT, as always; a fired cancel token with
 * CANCELED). Waiting for a free instance counts against the budget.
 *
 * It is for callers that may hold their thread only briefly and can run
 * the call again elsewhere when it does not finish in time, as the Erlang
 * NIF does: a call first runs on the caller's normal scheduler within a
 * short budget and, if it gave up, again from the start on a dirty
 * scheduler. Running a call again is only right for a callback whose
 * effects a repeat does not change (a pure function of its inputs; JAX's
 * pure_callback makes the same assumption): the abandoned attempt may
 * have logged lines, and its instance's state is gone. Ordered calls
 * must run exactly once, so there is no chain argument. */
callbox_error *callbox_call_within(callbox_host host, callbox_cancel_token cancel, const char *callback,
                                   const callbox_tensor *inputs, size_t num_inputs, callbox_tensor *outputs,
                                   size_t num_outputs, uint64_t budget_ns, int32_t *expired);

/* ---- Asynchronous calls (since 1.3) ------------------------------------
 *
 * callbox_call_async is callbox_call_cancelable that does not wait: it
 * checks the arguments it can (host, callback, names, tensors' dtypes,
 * shapes and data pointers; a count or type the callback does not take is
 * reported later, through done), copies the names and shapes, and
 * returns. The call then runs on a worker thread of the library's (a pool
 * that grows to as many threads as calls in flight at once, at most 1024,
 * beyond which calls queue; 16 MiB stacks, enough for wasmtime guests;
 * one worker done with a call polls for the next one for 20 us, yielding
 * its core between looks, before it sleeps, so that calls made one after
 * another find it awake), and when it is over the library calls
 * done(user, err) once, from that thread: err is NULL on success, else
 * an error that done owns (free it with callbox_error_free). A call refused at once returns its error and never
 * calls done; NULL means done will be called, exactly once.
 *
 * The caller keeps the tensors' data (inputs readable, outputs writable
 * and untouched) valid until done is called; the inputs and outputs arrays
 * and their shape and strides arrays may be freed when this returns.
 * cancel (0: none) and the token's later fire work as for
 * callbox_call_cancelable; chain NULL is an unordered call, else the
 * chain's next step (the step is taken in the order the calls start on the
 * library's threads, which for calls made from different threads is not
 * the order they were made: wait for one's done before making the next
 * when the order matters). callbox_close waits for the calls in flight
 * (not for their done functions): done may close the host. done must not
 * block for long (it holds a library thread) and must be thread-safe. */
callbox_error *callbox_call_async(callbox_host host, callbox_cancel_token cancel, const char *chain,
                                  const char *callback, const callbox_tensor *inputs, size_t num_inputs,
                                  callbox_tensor *outputs, size_t num_outputs, callbox_done_fn done, void *user);

/* ---- A call as a value (since 1.7): callbox_request, above ----------- */

/* Runs a request and returns its error (NULL: the outputs are written). */
callbox_error *callbox_request_run(callbox_host host, const callbox_request *req);

/* Runs a request asynchronously, as callbox_call_async runs a call: the
 * request struct and its arrays may be freed when this returns, the
 * tensors' data must stay valid until done is called. */
callbox_error *callbox_request_async(callbox_host host, const callbox_request *req, callbox_done_fn done,
                                     void *user);

/* Runs a callback for its side effect, asynchronously and unordered: the
 * inputs are copied before it returns, the outputs discarded. Its error
 * (if any) is returned by the next callbox_barrier. */
callbox_error *callbox_tap(callbox_host host, const char *callback,
                           const callbox_tensor *inputs, size_t num_inputs);

/* Waits for every callbox_tap and returns the first error among them
 * since the previous barrier. */
callbox_error *callbox_barrier(callbox_host host);

/* ---- Ordered chains ----------------------------------------------------------
 *
 * A chain is named; the same name on the same host is the same chain. Its
 * calls and taps run strictly in the order they are made. The first
 * failure fails the chain: every later call and tap on it does not run and
 * returns (or reports at the barrier) an error naming the first failure,
 * until callbox_chain_reset. */

/* Calls a callback as the chain's next step, waiting for it. */
callbox_error *callbox_chain_call(callbox_host host, const char *chain, const char *callback,
                                  const callbox_tensor *inputs, size_t num_inputs,
                                  callbox_tensor *outputs, size_t num_outputs);

/* Queues a side-effect call as the chain's next step and returns at once
 * (inputs are copied first). */
callbox_error *callbox_chain_tap(callbox_host host, const char *chain, const char *callback,
                                 const callbox_tensor *inputs, size_t num_inputs);

/* Waits for every step queued on the chain and returns its first failure. */
callbox_error *callbox_chain_barrier(callbox_host host, const char *chain);

/* callbox_barrier (chain NULL) or callbox_chain_barrier that stops waiting
 * when cancel fires (since 1.6): it then returns a CANCELED error at once,
 * and the taps and queued steps run on (the next barrier reports them).
 * With the token bound to SIGINT, Ctrl-C ends a barrier on a runaway tap. */
callbox_error *callbox_barrier_cancelable(callbox_host host, callbox_cancel_token cancel, const char *chain);

/* Waits for the chain's queued steps, then clears its failure: later calls
 * and taps on the name run again. Sequence numbers continue (they number
 * every step the chain has taken, for error messages). The failure it
 * clears is not an error; only a wait cut short is. */
callbox_error *callbox_chain_reset(callbox_host host, const char *chain);

/* ---- XLA FFI -----------------------------------------------------------------
 *
 * callbox_xla_ffi is an XLA FFI handler (the typed custom-call ABI,
 * api_version 4 in StableHLO) for the CPU platform. Register it, e.g. from
 * JAX: jax.ffi.register_ffi_target("callbox", jax.ffi.pycapsule(fn),
 * platform="cpu") ("callbox" is the target name the Python package and
 * `callbox lower` use). Attributes:
 *   callback  string: a callback name or content id ("cb1-...")
 *   chain     string, optional: run as the next step of that ordered chain
 *   batched   string, optional (since 1.3): "true" makes the call a batched
 *             call (callbox_call_batch: every buffer has a leading batch
 *             dimension; elements run in parallel for a callback whose
 *             batching is "parallel"); "false" or absent, a plain call
 *   host      string, optional (since 1.11): the host to call, as
 *             callbox_xla_host_attr names it, instead of the default host
 *             (below). It names a host of this process only: a program
 *             made elsewhere (exported, or from a compilation cache) that
 *             carries one is refused (FAILED_PRECONDITION), as is a call
 *             once that host is closed.
 * and no other (an unknown attribute is refused, so a misspelt chain never
 * runs unordered). Arguments are the callback's inputs and results its
 * outputs, in order, dense row-major; buffers of dtype TOKEN are skipped.
 * Errors carry the code of the failure kind (the table under Errors) and
 * a message "callbox <Kind>: ..." naming the callback, which ends (since
 * 1.11) with the token of the failure, " [callbox error TAG-N]": TAG
 * names this load of the library (8 hex digits, drawn at random when it
 * loads), N numbers its failures from 1. callbox_xla_failure gives back
 * the failure a token names.
 *
 * The handlers declare XLA FFI API version 0.2 in the metadata handshake,
 * or 0.1 to a framework at 0.1 (jaxlib 0.7 refuses a newer handler); XLA
 * accepts a handler whose version is at most its own. Tested under jaxlib
 * 0.7.2 and 0.10.2 by make test; layouts validated with jaxlib 0.11.2.
 *
 * The host it calls is the one attribute host names, else the default
 * host: the one set with callbox_set_default_host, else one opened on
 * first use from the file named by the CALLBOX_CONFIG environment
 * variable. */
struct callbox_xla_error *callbox_xla_ffi(struct callbox_xla_call_frame *call_frame);

/* The failure an XLA error reports (since 1.11): xla_message is the
 * error's message, or any text around it (a framework's exception text,
 * "INTERNAL: callbox Timeout: ... [callbox error 5f2c9a1e-17]"). When it
 * holds the token of a failure this library reported and still keeps,
 * *failure is set to that failure as a callbox_error (the caller frees
 * it), with every field a callbox_error of the same failure through the
 * C API has (kind, code, callback, chain, seq, message, guest_message,
 * text, the failed_* fields of a chain step refused after an earlier one
 * failed, batch_size and batch_element); else *failure is NULL: no token
 * (an error XLA or another library made, or a handler's error in a fork()
 * child, where no failure can be kept), a token of another process or of
 * an earlier load of the library, or a failure no longer kept. The
 * library keeps the last 1024 failures of its XLA handlers and of
 * callbox_cuda_call_dlpack, fewer when their text passes 4 MiB (the
 * oldest go first; the newest is always kept), and gives a failure back
 * as often as it is asked. The return value is an error only for a NULL
 * argument (and in a fork() child, as every entry's). */
callbox_error *callbox_xla_failure(const char *xla_message, callbox_error **failure);

/* The size of a buffer that holds any value callbox_xla_host_attr writes. */
#define CALLBOX_XLA_HOST_ATTR_SIZE 64

/* Writes into buf (cap bytes, NUL-terminated) the value of the XLA
 * handlers' attribute host that names host (since 1.11): "HANDLE@TAG",
 * valid in this process only, until the host is closed. A custom call
 * with it runs on that host, not on the default host. Refuses a closed or
 * unknown host, and a cap too small for the value (CALLBOX_XLA_HOST_ATTR_SIZE
 * always suffices). */
callbox_error *callbox_xla_host_attr(callbox_host host, char *buf, size_t cap);

/* Makes host the default host (0 clears it), for both XLA handlers and
 * callbox_cuda_call_dlpack. Calls through those entries on a closed default
 * host fail with FAILED_PRECONDITION. */
callbox_error *callbox_set_default_host(callbox_host host);
/* The default host, opening it from CALLBOX_CONFIG if none is set. */
callbox_error *callbox_default_host(callbox_host *out);

/* ---- CUDA (since 1.1) -------------------------------------------------------
 *
 * GPU tensors: device memory is copied straight into the sandbox's memory
 * on the caller's CUDA stream, the callback runs under its limits, and its
 * results are copied back to device memory on the same stream. The CUDA
 * runtime (libcudart.so.13, else .12) is loaded at run time on the first
 * GPU call: the library needs no CUDA to load, and on a machine without
 * one every GPU call fails with one clear error. All three entries serve
 * the default host, as the CPU handler does (callbox_set_default_host, else
 * the two calls open one from CALLBOX_CONFIG). The environment variable
 * CALLBOX_CUDA_COPY (read when a host opens) picks how bytes move: auto
 * (default: pinned guest memory where the engine's memory never moves,
 * else pinned staging buffers), staged, or pageable.
 *
 * callbox_cuda_call_dlpack reports failures as an absl status code (0:
 * success; the code of the table under Errors) and a NUL-terminated message
 * written into the caller's buffer (truncated to its capacity), not as
 * callbox_error objects; the message ends with the failure's token, as the
 * XLA handlers' do, so callbox_xla_failure gives the whole failure back
 * (since 1.11; a buffer too short for the whole message loses it). */

/* The XLA FFI handler for platform "CUDA": register it, e.g. from JAX,
 * with jax.ffi.register_ffi_target("callbox", jax.ffi.pycapsule(fn),
 * platform="CUDA"). Attributes, frame checks and error codes are
 * callbox_xla_ffi's (one decoder serves both); the stream comes from XLA
 * (Stream_Get), and an API table without one is FAILED_PRECONDITION. */
struct callbox_xla_error *callbox_xla_ffi_cuda(struct callbox_xla_call_frame *call_frame);

/* Calls callback (a name or content id) of the default host on DLPack
 * tensors in CUDA memory (PyTorch, CuPy): inputs and outputs are arrays of
 * pointers to tensors (a DLManagedTensor* works: its tensor comes first),
 * stream the CUDA stream (cudaStream_t) the tensors are ordered on; the
 * results are written on that stream before it returns. Returns 0, or an
 * absl code with the message in msg (msg_cap bytes, may be 0). */
int callbox_cuda_call_dlpack(const char *callback, uintptr_t stream, callbox_tensor *const *inputs,
                             size_t num_inputs, callbox_tensor *const *outputs, size_t num_outputs,
                             char *msg, size_t msg_cap);

/* Writes the GPU path's counters as JSON into buf (NUL-terminated,
 * truncated to cap): mode, calls, pinned_calls, staged_calls,
 * pageable_calls, pins, pin_time_ms, pinned_bytes, pinned_instances,
 * unpins, staging_buffers, staging_bytes. Returns the JSON's length (the
 * whole, even when truncated), or -1 when no default host is set. */
int64_t callbox_cuda_stats(char *buf, size_t cap);

#endif /* CALLBOX_BUILDING_LIBRARY */

#ifdef __cplusplus
}
#endif

#endif /* CALLBOX_H */
