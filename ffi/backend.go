//go:build cgo

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/host"
)

// backend is what the bridge needs from a host. It is small on purpose:
// when the host package grows its phase API (Lookup, a chain registry with
// Chain.InvokeInto) only hostBackend changes.
type backend interface {
	Callbacks() []host.Info
	InvokeInto(ctx context.Context, callback string, in, out []abi.Tensor) error
	ChainInvokeInto(ctx context.Context, chain, callback string, in, out []abi.Tensor) error
	ChainTap(ctx context.Context, chain, callback string, in []abi.Tensor)
	ChainBarrier(ctx context.Context, chain string) error
	ChainReset(ctx context.Context, chain string) error
	Tap(ctx context.Context, callback string, in []abi.Tensor)
	Barrier(ctx context.Context) error
	Close(ctx context.Context) error
}

// hostBackend is a backend over *host.Host, with a registry of named
// chains.
type hostBackend struct {
	h *host.Host

	mu     sync.Mutex
	chains map[string]*host.Chain
}

func newHostBackend(h *host.Host) *hostBackend {
	return &hostBackend{h: h, chains: map[string]*host.Chain{}}
}

func (b *hostBackend) Callbacks() []host.Info { return b.h.Callbacks() }

func (b *hostBackend) InvokeInto(ctx context.Context, callback string, in, out []abi.Tensor) error {
	_, err := b.h.InvokeInto(ctx, callback, in, out)
	return err
}

// chain returns the chain with this name, creating it on first use. name
// may point into C memory: a new chain gets its own copy.
func (b *hostBackend) chain(name string) *host.Chain {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch, ok := b.chains[name]
	if !ok {
		name = strings.Clone(name)
		ch = b.h.NewChain(name)
		b.chains[name] = ch
	}
	return ch
}

// ChainInvokeInto runs a call on the chain and copies its outputs into
// out, whose types the caller has checked against the signature (the
// chain's Invoke allocates its outputs).
func (b *hostBackend) ChainInvokeInto(ctx context.Context, chain, callback string, in, out []abi.Tensor) error {
	res, err := b.chain(chain).Invoke(ctx, callback, in...)
	if err != nil {
		return err
	}
	if len(res) != len(out) {
		return fmt.Errorf("callback %q returned %d outputs, want %d", callback, len(res), len(out))
	}
	for i := range res {
		if len(res[i].Data) != len(out[i].Data) {
			return badArg(argName{"output", i}, "buffer is %d bytes, result is %s%s", len(out[i].Data), res[i].DType, res[i].Shape)
		}
	}
	for i := range res {
		copy(out[i].Data, res[i].Data)
	}
	return nil
}

func (b *hostBackend) ChainTap(ctx context.Context, chain, callback string, in []abi.Tensor) {
	b.chain(chain).Tap(ctx, callback, in...)
}

func (b *hostBackend) ChainBarrier(ctx context.Context, chain string) error {
	return b.chain(chain).Barrier(ctx)
}

// ChainReset waits for the chain's queued steps and forgets it.
func (b *hostBackend) ChainReset(ctx context.Context, chain string) error {
	b.mu.Lock()
	ch, ok := b.chains[chain]
	delete(b.chains, chain)
	b.mu.Unlock()
	if !ok {
		return nil
	}
	// The chain's first failure is what reset discards; only a wait cut
	// short is an error.
	if err := ch.Barrier(ctx); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

func (b *hostBackend) Tap(ctx context.Context, callback string, in []abi.Tensor) {
	b.h.Tap(ctx, callback, in...)
}

func (b *hostBackend) Barrier(ctx context.Context) error { return b.h.Barrier(ctx) }

func (b *hostBackend) Close(ctx context.Context) error { return b.h.Close(ctx) }
