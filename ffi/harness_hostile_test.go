//go:build cgo

// The C harness and hostile guests: at call time on both engines through
// both APIs, and at load time.

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// TestHarnessHostile runs hostile guests on both engines through the C
// API and the XLA handler: each fails with its kind and code, the message
// names the callback and the kind, and the process survives to serve a
// normal call.
func TestHarnessHostile(t *testing.T) {
	r := harnessGroups(t, true, nil, "hostile")
	for _, hc := range hostileCalls {
		for _, engine := range []string{"wazero", "wasmtime"} {
			name := hc.name(engine)
			status := abi.StatusOK
			if hc.kind == abi.GuestError {
				status = abi.StatusInvalidArgument
			}
			code := hc.kind.Code(status)
			line, found := r.errs["capi_"+name]
			if assert.True(t, found, name) {
				assert.Equal(t, hc.kind.Ident(), line.kind, "%s: %s", name, line.text)
				assert.Equal(t, int(code), line.code, name)
				assert.Equal(t, name, line.callback)
			}
			r.xfails(t, "xla_"+name, code, fmt.Sprintf("callbox %s: callback %q", hc.kind.Ident(), name))
			// The XLA error's token gives back the failure the C API
			// gives for the same call: kind, code, callback, guest
			// message and text.
			failure, found := r.errs["xlaf_"+name]
			if assert.True(t, found, "%s: callbox_xla_failure gave no failure (%s)", name, r.vals["xlaf_"+name]) {
				assert.Equal(t, line.kind, failure.kind, name)
				assert.Equal(t, line.code, failure.code, name)
				assert.Equal(t, name, failure.callback, name)
				assert.Equal(t, line.guest, failure.guest, name)
				assert.Equal(t, line.text, failure.text, name)
			}
		}
	}
	r.ok(t, "hostile_survived")
}

// TestHarnessHostileLoad opens hosts whose module attacks at load time,
// on both engines: callbox_open fails with the kind and code of the
// attack, naming the callback, and the harness process survives to print
// it.
func TestHarnessHostileLoad(t *testing.T) {
	bin := buildHarness(t)
	cases := []struct {
		module string
		kind   abi.Kind
		msg    string
	}{
		{"load_version_wrong", abi.ABIViolation, "guest reports ABI version 2"},
		{"load_start_loop", abi.Timeout, ""},
		{"load_memory_huge", abi.MemoryLimit, "above the callback's max_memory"},
		{"load_start_trap", abi.StackOverflow, ""},
	}
	for _, c := range cases {
		for _, engine := range []string{"wazero", "wasmtime"} {
			t.Run(c.module+"/"+engine, func(t *testing.T) {
				dir := t.TempDir()
				src, err := os.ReadFile(filepath.Join("..", "host", "testdata", "hostile", c.module+".wat"))
				require.NoError(t, err)
				wasm, err := wat.Compile(string(src))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, "m.wasm"), wasm, 0o644))
				cfg := filepath.Join(dir, "callbox.yaml")
				require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(
					"callbacks:\n  evil:\n    module: m.wasm\n    export: run\n    signature: \"(x: f32[n]) -> f32[n]\"\n    engine: %s\n    timeout: 250ms\n    max_memory: 1MiB\n", engine)), 0o644))
				out, err := exec.Command(filepath.Join(bin, "harness"), cfg, dir, "version").CombinedOutput()
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit, "the open must fail: %s", out)
				assert.Equal(t, 1, exit.ExitCode(), "a clean failure, not a crash: %s", out)
				f := strings.Split(strings.TrimSpace(string(out)), "\t")
				require.Len(t, f, 9, string(out))
				assert.Equal(t, []string{"ERR", "open", c.kind.Ident(), strconv.Itoa(int(c.kind.Code(abi.StatusOK))), "evil"}, f[:5])
				assert.Contains(t, f[8], `callback "evil"`)
				assert.Contains(t, f[8], c.msg)
			})
		}
	}
}
