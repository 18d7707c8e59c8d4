// Package cuda moves GPU tensors into sandboxed callbacks and their
// results back, with as few copies as the hardware allows.
//
// A call from a GPU program (an XLA FFI handler, a DLPack tensor from
// PyTorch or CuPy) goes through the host's phases (host.Callback.Start,
// Call.Input, Run, Output, Close) with device copies in between:
//
//	for each input   device-to-host copy straight into its place in guest
//	                 memory, on the caller's stream
//	sync             the stream: every input has landed
//	run              the guest, under the callback's limits
//	for each result  host-to-device copy from its place in guest memory into
//	                 the caller's device buffer, on the stream; a
//	                 pass-through result ($x) written in place copies nothing
//	wait             an event recorded after the copies: only then is the
//	                 instance released (Close), so it is never reused while
//	                 a copy may still read or write its memory
//
// Copies between device memory and page-locked ("pinned") host memory run
// at full bus speed; from ordinary pageable memory they are several times
// slower. Pinning costs 10–22 ms per 64 MiB, so it is done once per
// long-lived buffer, never per call. GPU pins each pooled instance's linear
// memory the first time it serves a GPU call (its accessible extent, then
// each newly grown part) when the engine guarantees that the memory never
// moves (host.GuestMemory.Stable), and unpins it when the host closes the
// instance (Hooks gives the host.Option that wires this). Elsewhere
// (isolation "fresh", memory that may move) a call copies through a small
// pool of pinned staging buffers owned by GPU, or, when the pool is
// exhausted, straight to and from pageable guest memory. Stats says which
// path each call took and what pinning cost.
//
// Device is the small part of the CUDA runtime the path needs. Runtime
// loads the real one (libcudart.so.13, then .12) at run time with purego:
// building needs neither CUDA headers nor cgo, and on a machine without
// CUDA everything builds and a GPU call fails with one clear error. Fake is
// a device over host memory for tests: device buffers are poisoned until a
// copy into them completes, and copies complete only at a stream sync or
// event wait, so a missing sync or a buffer reused before its copy
// completed shows up as wrong data.
package cuda
