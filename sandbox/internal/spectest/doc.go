// Package spectest runs the WebAssembly specification test suite through
// callbox's load path: every module the suite calls valid, run plain and
// through the rewrites callbox applies before an engine compiles it (the
// table limit and the meter, as each engine applies them), must give the
// same results bit for bit, NaN payloads included, and trap with the same
// kind; every module the suite calls invalid or malformed must be refused
// by callbox's validation, and by every engine configuration's compile
// path, before any rewrite sees it.
//
// The suite is the one the wazero module this project depends on ships as
// JSON and .wasm files (wast2json's output), read from the module cache
// (go list -m), not copied into this repository: WebAssembly 2.0 (SIMD
// included) and the two proposals callbox enables, tail calls and
// extended constant expressions.
//
// The package holds tests only.
package spectest
