// Package abi is callbox's guest ABI, version 1: element types numbered as
// XLA's, tensor descriptors, the call frame the host writes into guest
// memory, status codes, the signature language, and the single place where
// guest-controlled pointers and lengths are bounds-checked.
//
// The normative specification is ABI.md in this directory; this package is
// its host-side implementation. It imports no WebAssembly engine.
package abi
