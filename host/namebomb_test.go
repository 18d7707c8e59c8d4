package host_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// TestNameSectionBombIsRefusedAtLoad: the 40-byte module whose name
// section made wazero allocate 39 GB (sandbox/internal/wasmbin,
// TestNameSubsectionMustFillItsSize) is refused at load, on both engines,
// with an InvalidArgument naming the subsection (callbox's reader refuses
// it before any engine's decoder sees it), and the host serves on.
func TestNameSectionBombIsRefusedAtLoad(t *testing.T) {
	bomb := []byte("\x00asm\x01\x00\x00\x00\x00\x1e\x04name\x00\x06\x00\x020\xca\xca\xca\xca\x0400000\t000000000")
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, nil)
		cb := config.DefaultCallback()
		cb.Name, cb.Engine, cb.Signature = "bomb", engine, "(x: f32[n]) -> f32[n]"
		err := h.LoadModule(context.Background(), cb, bomb)
		require.ErrorIs(t, err, host.InvalidArgument)
		assert.Contains(t, err.Error(), "name subsection 0")
		_, ok := h.Callback("scale")
		assert.True(t, ok, "the host serves on")
	})
}
