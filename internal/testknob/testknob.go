// Package testknob holds the host's settings that exist only for tests of
// the project's own (the guest SDKs' conformance suite): they ride on the
// context given to host.New, so that no exported name of package host
// offers them, and only packages of this module can set them (Go's
// internal rule), as wazero keeps its experimental settings off its
// stable API.
package testknob

import "context"

type skewedKey struct{}

// WithSkewedBuffers returns a context that makes host.New place every data
// buffer of every call frame at the least alignment ABI v1 promises (16
// bytes past a 64-byte boundary) instead of 64: a guest SDK that assumes
// more alignment than the ABI guarantees fails under it.
func WithSkewedBuffers(ctx context.Context) context.Context {
	return context.WithValue(ctx, skewedKey{}, true)
}

// SkewedBuffers reports whether ctx asks for skewed buffers.
func SkewedBuffers(ctx context.Context) bool {
	v, _ := ctx.Value(skewedKey{}).(bool)
	return v
}
