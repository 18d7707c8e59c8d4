//go:build linux

package cuda

import (
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPointerAttributesHoldWhatTheRuntimeWrites: cudaPointerGetAttributes
// writes the whole struct of CUDA 12 and 13, reserved[8] included (88
// bytes); the Go struct it writes into must be at least that large, or the
// runtime writes past it into other Go objects (seen on an H200: wazero's
// state corrupted once in about a hundred calls). The fake runtime writes
// the real layout and fills reserved with a pattern.
func TestPointerAttributesHoldWhatTheRuntimeWrites(t *testing.T) {
	assert.GreaterOrEqual(t, unsafe.Sizeof(pointerAttributes{}), uintptr(88), "CUDA 12/13's struct cudaPointerAttributes")
	assert.Equal(t, uintptr(24), unsafe.Offsetof(pointerAttributes{}.Reserved))
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	lib := filepath.Join(t.TempDir(), "libcudart.so.13")
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, "testdata/fakecudart.c").CombinedOutput()
	require.NoError(t, err, "%s", out)
	rt, err := OpenRuntimeFrom(lib)
	require.NoError(t, err)
	var a pointerAttributes
	require.Zero(t, rt.pointerAttrs(&a, 0x1000))
	for i, v := range a.Reserved {
		assert.Equal(t, int64(0x5EC0DE00+i), v, "reserved[%d] landed in the struct", i)
	}
}
