//go:build linux

package procwall

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// bellPair maps one doorbell file twice, as the host and the worker do.
func bellPair(t *testing.T, spin time.Duration) (host, worker *bell) {
	t.Helper()
	fd, err := newBellFile()
	require.NoError(t, err)
	defer closeFD(fd)
	host, err = mapBell(fd, spin)
	require.NoError(t, err)
	worker, err = mapBell(fd, spin)
	require.NoError(t, err)
	t.Cleanup(func() { host.close(); worker.close() })
	return host, worker
}

// TestBellRoundTrips: requests and replies of every size the areas hold
// cross the doorbell in order, with both sides spinning and with both
// sleeping on the futex (no spin at all), and a peer that stops
// answering is reported gone, not waited for forever.
func TestBellRoundTrips(t *testing.T) {
	for _, spin := range []time.Duration{hostSpin, 0} {
		t.Run(fmt.Sprint(spin), func(t *testing.T) {
			host, worker := bellPair(t, spin)
			if spin == 0 {
				host.spin.misses, worker.spin.misses = 1, 1 // never retry a spin during the test
			}
			done := make(chan error, 1)
			go func() {
				var last uint32
				for {
					v, err := worker.await(offReqSeq, offWorkerZz, last, false, func() bool { return true })
					if err != nil {
						done <- err
						return
					}
					last = v
					worker.word(offAckSeq).Store(v)
					n := worker.word(offReqLen).Load()
					if n == lenClose {
						done <- nil
						return
					}
					req := bytes.Clone(worker.mem[reqArea : reqArea+int(n)])
					rep := append(bytes.ToUpper(req), '!')
					worker.post(offRepSeq, offRepLen, repArea, offHostZz, rep, uint32(len(rep)), v)
				}
			}()
			for seq, size := range []int{1, 7, 1024, 4096, areaMax - 1} {
				req := bytes.Repeat([]byte{'a' + byte(seq)}, size)
				s := uint32(seq + 1)
				host.post(offReqSeq, offReqLen, reqArea, offWorkerZz, req, uint32(len(req)), s)
				_, err := host.await(offRepSeq, offHostZz, s, true, func() bool { return true })
				require.NoError(t, err)
				n := host.word(offRepLen).Load()
				require.Equal(t, uint32(size+1), n)
				assert.Equal(t, append(bytes.ToUpper(req), '!'), host.mem[repArea:repArea+int(n)])
				assert.Equal(t, s, host.word(offAckSeq).Load(), "the worker acknowledged the request")
			}
			host.post(offReqSeq, offReqLen, reqArea, offWorkerZz, nil, lenClose, 99)
			require.NoError(t, <-done)

			// Nobody answers request 100: the peer is gone at the first
			// alive check.
			start := time.Now()
			_, err := host.await(offRepSeq, offHostZz, 100, true, func() bool { return false })
			assert.ErrorIs(t, err, errBellGone)
			assert.Less(t, time.Since(start), time.Minute)
		})
	}
}

// TestBellRefusesAnotherFile: a doorbell of the wrong size is refused
// before it is mapped.
func TestBellRefusesAnotherFile(t *testing.T) {
	fd, err := unix.MemfdCreate("not-a-bell", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	defer closeFD(fd)
	require.NoError(t, unix.Ftruncate(fd, 4096))
	_, err = mapBell(fd, 0)
	assert.ErrorContains(t, err, "not 131072")
}

// TestBellIsSealed: the worker cannot shrink (or grow) the doorbell's
// file, so the host's mapping of it can never fault.
func TestBellIsSealed(t *testing.T) {
	fd, err := newBellFile()
	require.NoError(t, err)
	defer closeFD(fd)
	assert.Error(t, unix.Ftruncate(fd, 4096), "shrinking a sealed doorbell")
	assert.Error(t, unix.Ftruncate(fd, 2*bellSize), "growing a sealed doorbell")
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	require.NoError(t, err)
	assert.Equal(t, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL, seals)
}
