package host_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/tensorfile"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// TestDifferentialConformance runs every conformance vector
// (guests/testdata/conformance) through every guest built from source
// (guests/build/<lang>/<example>.wasm, made by `make guests`) on wazero and
// on wasmtime, and compares the two engines with each other: the same
// error kind, status and guest message, and the same outputs — bit for
// bit, except that any two NaNs are equal (WebAssembly leaves NaN payloads
// to the engine outside deterministic: true): the vectors where the NaN
// bits differ are named in the log. The conformance suite in guests/ compares each engine
// with the Go reference within a tolerance; this test needs no tolerance.
// The hostile cases are compared the same way by TestHostile, and fuzzed
// ones by FuzzGuest.
func TestDifferentialConformance(t *testing.T) {
	if !engines.WasmtimeAvailable() {
		t.Skip("this build has no wasmtime engine (cgo disabled)")
	}
	if raceEnabled {
		t.Skip("compares engines, not goroutines: runs in the normal suite, not under -race (where compiling every guest takes minutes)")
	}
	vectors, _ := filepath.Glob("../guests/testdata/conformance/*")
	langs, _ := filepath.Glob("../guests/build/*")
	if len(vectors) == 0 || len(langs) == 0 {
		t.Skip("no conformance vectors or built guests: run make guests")
	}
	examples := []string{"histogram_s32", "histogram", "tap_print", "checked", "softmax", "matmul", "scale"}
	ctx := context.Background()
	compared := 0
	var nanCases []string
	for _, langDir := range langs {
		lang := filepath.Base(langDir)
		hosts := map[string]*host.Host{}
		for _, e := range []string{config.EngineWazero, config.EngineWasmtime} {
			h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			defer h.Close(ctx)
			hosts[e] = h
		}
		for _, ex := range examples {
			path := filepath.Join(langDir, ex+".wasm")
			wasm, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			m, err := sandbox.ParseModule(wasm)
			require.NoError(t, err, path)
			for e, h := range hosts {
				cb := config.DefaultCallback()
				cb.Name, cb.Module, cb.Engine = ex, path, e
				cb.Limits.MaxMemory = 256 << 20
				if m.ImportsWASI() {
					cb.WASI = config.WASIMinimal
				}
				require.NoError(t, h.LoadModule(ctx, cb, wasm), "%s on %s", path, e)
			}
		}
		for _, dir := range vectors {
			name := filepath.Base(dir)
			ex := ""
			for _, e := range examples {
				if strings.HasPrefix(name, e+"_") && len(e) > len(ex) {
					ex = e
				}
			}
			if _, ok := hosts[config.EngineWazero].Callback(ex); !ok {
				continue
			}
			ins := readVector(t, dir)
			t.Run(lang+"/"+name, func(t *testing.T) {
				results, exact := map[string]string{}, map[string]string{}
				for _, e := range []string{config.EngineWazero, config.EngineWasmtime} {
					outs, err := hosts[e].Invoke(ctx, ex, ins...)
					results[e], exact[e] = describeResult(outs, err, false), describeResult(outs, err, true)
				}
				require.Equal(t, results[config.EngineWazero], results[config.EngineWasmtime], "the engines disagree")
				if exact[config.EngineWazero] != exact[config.EngineWasmtime] {
					// Allowed outside deterministic: true, and named.
					nanCases = append(nanCases, lang+"/"+name)
				}
				compared++
			})
		}
	}
	t.Logf("%d vectors compared across engines", compared)
	if len(nanCases) > 0 {
		t.Logf("NaN bits differ between the engines (allowed without deterministic: true) in %d: %v", len(nanCases), nanCases)
	}
}

func readVector(t *testing.T, dir string) []abi.Tensor {
	files, _ := filepath.Glob(filepath.Join(dir, "in*.npy"))
	sort.Strings(files)
	var ins []abi.Tensor
	for _, f := range files {
		tn, err := tensorfile.ReadFile(f)
		require.NoError(t, err)
		ins = append(ins, tn)
	}
	return ins
}

// describeResult renders a call's result so that two engines' results
// compare equal exactly when they agree: with exactNaN, bit for bit; else
// NaNs are rendered alike.
func describeResult(outs []abi.Tensor, err error, exactNaN bool) string {
	if err != nil {
		var ce *host.CallbackError
		if !errors.As(err, &ce) {
			return "untyped error: " + err.Error()
		}
		// The message too: one message per kind, whatever the engine.
		return fmt.Sprintf("%s status=%v guest=%q message=%q", ce.Kind().Ident(), ce.Status, ce.GuestMessage, ce.Message)
	}
	var b strings.Builder
	for i, o := range outs {
		fmt.Fprintf(&b, "output %d: %s\n", i, o.Type())
		switch o.DType {
		case abi.F32:
			for _, v := range abi.MustView[float32](o) {
				if math.IsNaN(float64(v)) && !exactNaN {
					b.WriteString("NaN ")
				} else {
					fmt.Fprintf(&b, "%08x ", math.Float32bits(v))
				}
			}
		case abi.F64:
			for _, v := range abi.MustView[float64](o) {
				if math.IsNaN(v) && !exactNaN {
					b.WriteString("NaN ")
				} else {
					fmt.Fprintf(&b, "%016x ", math.Float64bits(v))
				}
			}
		default:
			fmt.Fprintf(&b, "%x", o.Data)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestDifferentialLoad loads every hostile module that must fail (or
// pass) at load on wazero and on wasmtime side by side and requires the
// same outcome: the same kind and the same message, word for word (start
// function traps, _initialize, the probe calls, the load check). The one
// documented difference (elem_oob, a wazero choice) is skipped.
func TestDifferentialLoad(t *testing.T) {
	if !engines.WasmtimeAvailable() {
		t.Skip("this build has no wasmtime engine (cgo disabled)")
	}
	ctx := context.Background()
	compared := 0
	for _, hc := range hostileCases {
		if hc.Phase != atLoad || hc.Differs != nil {
			continue
		}
		t.Run(hc.Name, func(t *testing.T) {
			wasm := hostileWasm(t, hc)
			results := map[string]string{}
			for _, e := range []string{config.EngineWazero, config.EngineWasmtime} {
				h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
				require.NoError(t, err)
				err = h.LoadModule(ctx, hostileCallback(hc, e), wasm)
				results[e] = "loaded"
				if err != nil {
					results[e] = fmt.Sprintf("%s: %v", abi.KindOf(err).Ident(), err)
				}
				require.NoError(t, h.Close(ctx))
			}
			require.Equal(t, results[config.EngineWazero], results[config.EngineWasmtime], "the engines disagree at load")
			compared++
		})
	}
	t.Logf("%d modules compared at load across engines", compared)
}
