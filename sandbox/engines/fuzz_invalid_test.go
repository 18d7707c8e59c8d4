package engines_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/validate"
)

// fuzzBases are the valid modules FuzzInvalidModules mutates: the
// testkit and the hostile guests (globals, loops, tables, indirect calls,
// memory and bulk operations, WASI imports) and the hostile suite's
// scripted guest.
func fuzzBases(f *testing.F) [][]byte {
	var bases [][]byte
	for _, p := range []string{
		"../../guests/wat/testkit.wat",
		"../../host/testdata/hostile/runaway.wat",
		"../../host/testdata/hostile/traps.wat",
		"../../host/testdata/hostile/scripted.wat",
		"../../host/testdata/hostile/wasi.wat",
	} {
		src, err := os.ReadFile(filepath.FromSlash(p))
		if err != nil {
			f.Fatal(err)
		}
		bases = append(bases, wat.Must(string(src)))
	}
	return bases
}

// mutate changes wasm as program says, a few bytes at a time: each step
// is an operation (one byte), a position (two) and an amount (one). The
// operations make the invalid modules a rewrite could turn valid: an
// index operand bumped past its end (one more than the module has of a
// global, local, label, type or function), a byte changed, a LEB128
// number made over-long, a section size off by a little, a cut.
func mutate(wasm []byte, program []byte) []byte {
	out := append([]byte(nil), wasm...)
	for len(program) >= 4 && len(out) > 8 {
		op, at, by := program[0], int(binary.LittleEndian.Uint16(program[1:3])), program[3]
		program = program[4:]
		pos := 8 + at%(len(out)-8)
		switch op % 5 {
		case 0: // the next index-taking opcode's operand, plus 1..4
			for i := pos; i+1 < len(out); i++ {
				switch out[i] {
				case 0x20, 0x21, 0x22, 0x23, 0x24, 0x0c, 0x0d, 0x10, 0x11:
					if out[i+1] < 0x7c {
						out[i+1] += 1 + by%4
						i = len(out)
					}
				}
			}
		case 1: // a byte changed
			out[pos] ^= by | 1
		case 2: // an over-long LEB128: one more continuation byte
			if out[pos] < 0x80 {
				out = append(out[:pos], append([]byte{out[pos] | 0x80, 0x00}, out[pos+1:]...)...)
			}
		case 3: // a size (or any byte) off by a little
			out[pos] += by%5 - 2
		case 4: // a cut
			out = out[:pos]
		}
	}
	return out
}

// plainWazeroRefuses reports whether wazero's decoder and validator, as
// they are (callbox's features), refuse wasm: a module any engine refuses
// as it is must be refused by callbox on every engine.
func plainWazeroRefuses(wasm []byte) (refused bool) {
	defer func() {
		if recover() != nil {
			refused = true
		}
	}()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(validate.WazeroFeatures))
	defer rt.Close(ctx)
	_, err := rt.CompileModule(ctx, wasm)
	return err != nil
}

// FuzzInvalidModules mutates valid modules into (mostly) invalid ones and
// requires: every module that wazero or wasmtime, as they are, refuses is
// refused by callbox's compile path on every engine configuration,
// metered or plain (wazero, always metered; wasmtime without fuel, the
// grow hook only; wasmtime with fuel, the whole meter), with an
// InvalidModuleError, before any rewrite runs; and the engines' own
// opinions agree with callbox's validation, which accepts a module only
// when every validator does.
func FuzzInvalidModules(f *testing.F) {
	bases := fuzzBases(f)
	for i := range bases {
		f.Add(uint8(i), []byte{0, 0x10, 0x00, 0})                                  // an index bumped early
		f.Add(uint8(i), []byte{0, 0x00, 0x40, 1, 0, 0x00, 0x80, 2})                // two bumps further on
		f.Add(uint8(i), []byte{1, 0x33, 0x01, 0x5a})                               // a byte changed
		f.Add(uint8(i), []byte{2, 0x01, 0x00, 0})                                  // an over-long LEB128
		f.Add(uint8(i), []byte{3, 0x02, 0x00, 4})                                  // a section size off
		f.Add(uint8(i), []byte{4, 0x00, 0x02, 0, 0, 0x10, 0x00, 1})                // a cut
		f.Add(uint8(i), []byte{0, 0xff, 0xff, 3, 3, 0x00, 0x30, 1, 1, 9, 9, 0xff}) // mixed
	}
	ctx := context.Background()
	type way struct {
		name string
		e    sandbox.Engine
		fuel uint64
	}
	var ways []way
	for _, name := range engines.Engines() {
		e, err := engines.New(ctx, name, engines.Options{})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { _ = e.Close(ctx) })
		ways = append(ways, way{name, e, 0})
		if name == config.EngineWasmtime {
			ways = append(ways, way{name + "+fuel", e, 1 << 30})
		}
	}
	f.Fuzz(func(t *testing.T, base uint8, program []byte) {
		wasm := mutate(bases[int(base)%len(bases)], program)
		refusedBy := ""
		switch {
		case plainWazeroRefuses(wasm):
			refusedBy = "wazero"
		case plainWasmtimeRefuses(wasm):
			refusedBy = "wasmtime"
		}
		for _, w := range ways {
			m, err := sandbox.Compile(ctx, w.e, wasm, sandbox.ModuleConfig{Name: "fuzz", Limits: config.Limits{Timeout: time.Second, Fuel: w.fuel}})
			if m != nil {
				_ = m.Close(ctx)
			}
			var inv *sandbox.InvalidModuleError
			invalid := errors.As(err, &inv)
			if refusedBy != "" && !invalid {
				t.Fatalf("%s refuses the module as it is, but callbox on %s gave %v (sha256 %x)", refusedBy, w.name, err, sha256.Sum256(wasm))
			}
			if refusedBy == "" && invalid && inv.Validator != "callbox's reader" {
				t.Fatalf("every engine accepts the module as it is, but callbox on %s refuses it: %v", w.name, err)
			}
		}
	})
}
