// Package procwall is callbox's second wall: isolation: process runs a
// callback's engine in a separate, locked-down worker process, so that a
// bug in a WebAssembly engine (a validator panic, a miscompilation, a
// sandbox escape) reaches that worker and not the caller's process.
//
// The host side (Engine, and the module and instance it hands out) speaks
// the engine.Engine contract, so package host drives a worker exactly as it
// drives an in-process engine: the same kinds, messages, pools, chains and
// taps. Each compiled module has one worker process, which compiles the
// module once and serves every instance of it, each on a socket of its own
// (SOCK_SEQPACKET), so concurrent instances run on the worker's threads in
// parallel. A guest's linear memory is a sealed memfd mapped by both
// processes (wazero's memory allocator, wasmtime's memory creator in the C
// glue), so the host writes inputs into, and reads outputs from, guest
// memory as it does in process, with no copy of its own.
//
// The worker (Serve) locks itself down before it reads a byte of a guest
// (lockdown_linux.go): it closes every inherited descriptor, lowers its
// resource limits, sets no_new_privs and installs a seccomp-bpf allowlist
// whose default action kills the process; Report says what was applied.
// A worker that dies mid-call fails that call as abi.WorkerDied naming
// the signal, and is replaced on the next instantiation, with a backoff so
// that a module that crashes every worker cannot make the host spin.
package procwall
