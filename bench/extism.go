package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	extism "github.com/extism/go-sdk"
)

// The Extism comparison: kernels_extism.wasm as an Extism plugin, run by
// github.com/extism/go-sdk (wazero inside; Extism's Go SDK has no wasmtime
// backend). A call passes the tensor the way Extism plugins take data: one
// byte buffer in, one out. The host encodes the input (a 16-byte header,
// then the tensors; see kernels_extism.c) into a buffer it reuses, and
// Plugin.Call copies it into the Extism kernel's memory; the guest reads it
// into its own memory 8 bytes per input_load_u64 host call, runs the
// kernel, and writes the output back 8 bytes per store_u64 host call; the
// SDK copies the output out into a new []byte, which is viewed as []float32
// without a further copy. The plugin has no timeout (Extism's timeout turns
// on wazero's WithCloseOnContextDone, which only makes it slower) and is
// reused across calls, as Extism's docs recommend.

func newExtismPlugin(ctx context.Context) (*extism.Plugin, error) {
	wasm, err := ExtismModule()
	if err != nil {
		return nil, err
	}
	manifest := extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm, Name: "main"}}}
	p, err := extism.NewPlugin(ctx, manifest, extism.PluginConfig{}, nil)
	if err != nil {
		return nil, fmt.Errorf("extism: %w", err)
	}
	return p, nil
}

// extismInput encodes a workload's input: the header, then the tensors.
func extismInput(d *data, buf []byte) []byte {
	const header = 16
	n := header + d.inputBytes()
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	clear(buf[:header])
	switch d.w.Kernel {
	case "scale":
		binary.LittleEndian.PutUint32(buf[0:], math.Float32bits(d.factor))
		binary.LittleEndian.PutUint32(buf[4:], uint32(d.w.Dims[0]))
	default:
		for i, dim := range d.w.Dims {
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(dim))
		}
	}
	at := header
	for _, in := range d.inputs {
		at += copy(buf[at:], bytesOf(in))
	}
	return buf
}

// extismRunner calls the plugin; each call encodes the input afresh (the
// caller's tensors are not an Extism input until encoded).
func extismRunner(ctx context.Context, p *extism.Plugin, d *data) (*runner, error) {
	var buf, out []byte
	one := func() error {
		buf = extismInput(d, buf)
		rc, o, err := p.CallWithContext(ctx, d.w.Kernel, buf)
		if err != nil {
			return fmt.Errorf("extism %s: %w", d.w.Kernel, err)
		}
		if rc != 0 {
			return fmt.Errorf("extism %s: returned %d", d.w.Kernel, rc)
		}
		out = o
		return nil
	}
	return &runner{
		op:     repeat(d.w.Calls, one),
		output: func() []float32 { return floatsOf(out) },
	}, nil
}
