package hugepage

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"
)

func TestInterior(t *testing.T) {
	const mib = 1 << 20
	start, n := interior(3*mib, 8*mib) // [3, 11) MiB: [4, 10)
	assert.Equal(t, uintptr(4*mib), start)
	assert.Equal(t, uintptr(6*mib), n)
	start, n = interior(1*mib, 3*mib) // [1, 4): [2, 4)
	assert.Equal(t, uintptr(2*mib), start)
	assert.Equal(t, uintptr(2*mib), n)
	_, n = interior(1*mib+1, 2*mib) // no whole huge page
	assert.Zero(t, n)
}

// TestAdvise: a buffer below MinBytes is left alone; a large mapping is
// advised on Linux (where the kernel has THP), and its bytes are as they
// were.
func TestAdvise(t *testing.T) {
	assert.False(t, Advise(make([]byte, MinBytes-1)))
	if runtime.GOOS != "linux" {
		assert.False(t, Advise(make([]byte, MinBytes)))
		return
	}
	b, err := unix.Mmap(-1, 0, 8<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	b[0], b[len(b)-1] = 7, 9
	ok := Advise(b)
	if thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil && !strings.Contains(string(thp), "[never]") {
		assert.True(t, ok, "THP is on (%s) and the advice was refused", strings.TrimSpace(string(thp)))
	}
	assert.Equal(t, byte(7), b[0])
	assert.Equal(t, byte(9), b[len(b)-1])
}
