package wazero

import (
	"context"
	"testing"

	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A module whose function names a type index out of range, called from
// another function, makes wazero's validator panic (it indexes its type
// table unchecked). The load check refuses such modules first (wasmbin);
// the engine still turns the panic into a failed compile. The unmetered
// engine is used so that the meter, which refuses the module too, does not
// stand in front of wazero.
func TestCompilePanicIsAnError(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, Options{CloseOnContextDone: true})
	require.NoError(t, err)
	defer e.Close(ctx)
	wasm := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" + // (type (func))
		"\x03\x03\x02\x00\x30" + // two functions, of types 0 and 48
		"\x0a\x09\x02" + // code: two bodies
		"\x04\x00\x10\x01\x0b" + // func 0: call 1
		"\x02\x00\x0b") // func 1: nothing
	_, err = e.Compile(ctx, wasm, sandbox.ModuleConfig{Name: "m"})
	assert.ErrorContains(t, err, "wazero's compile panicked")
}
