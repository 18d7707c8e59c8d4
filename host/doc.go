// Package host is callbox's public Go API: it loads callback modules
// (WebAssembly, any source language) from config or programmatically, checks
// them against ABI v1, and runs calls on them under per-callback limits.
//
// A call hands the guest tensors through a call frame in its memory (see
// abi/ABI.md), checks the inputs against the callback's signature first, and
// copies outputs back only after the guest succeeded and passed every
// check. Every failure is a *CallbackError with a Kind from one taxonomy
// (Timeout, MemoryLimit, Unreachable, GuestError, ABIViolation, ...) that
// errors.Is matches; an instance that trapped is discarded, and the host
// keeps serving. A call's context bounds it: canceling it stops the guest
// (Canceled), and its deadline, when earlier than the callback's timeout,
// is the call's deadline (Timeout wrapping context.DeadlineExceeded),
// enforced by the engine as timeouts are, the wait for an instance
// included; Request.Budget gives a call such a deadline as a budget from
// its start, without a context of its own (a bridge's cheap "try this for
// at most 100 µs"). A module refused at load is a
// *LoadError, with a Kind too.
// docs/SECURITY.md gives the threat model and every limit.
//
// A call is a value, a Request (the callback, inputs, outputs or none to
// allocate, a batch dimension, a budget, a chain), run by Host.Do or, on
// a callback resolved once, Callback.Do, which own every check a call
// needs; Invoke is Do with the common fields set, returning the outputs,
// and every other door (C, Python, Elixir, XLA) fills in a Request too. Calls can be made directly, in strict order
// on a Chain (ordered effects, as JAX's io_callback(ordered=True)), or as
// fire-and-forget taps collected by a Barrier (JAX's id_tap and
// barrier_wait). A batched call (Request.Batch) runs one call per element
// of inputs with a leading batch dimension: concurrently on pooled
// instances for a callback whose batching is parallel, in order otherwise
// (batch.go).
//
// Every loaded callback has a content-addressed ID, the sha256 of its module
// bytes, export name and signature, so a compiled tensor program can name a
// callback without a process-local pointer.
package host
