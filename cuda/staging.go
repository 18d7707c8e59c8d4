package cuda

import (
	"fmt"
	"sort"
	"sync"
	"time"
	"unsafe"
)

// stagingAlign is the alignment of each tensor in a staging buffer.
const stagingAlign = 256

// minStaging is the smallest staging buffer allocated.
const minStaging = 1 << 20

// stagingBuf is one pinned host buffer.
type stagingBuf struct {
	mem []byte
}

// stagingPool is a small pool of pinned host buffers owned by a GPU, for
// calls whose guest memory is not pinned (fresh isolation, memory that may
// move): their copies go device <-> staging buffer at pinned speed, plus
// one host copy between the buffer and guest memory. The pool holds at
// most limit bytes; a call that needs more than is free gets no buffer and
// copies pageable.
type stagingPool struct {
	dev   Device
	limit uint64

	mu    sync.Mutex
	free  []*stagingBuf // sorted by size
	total uint64        // bytes allocated, free or in use
	count int
}

// get returns a buffer of at least need bytes, registering a new one when
// none is free (took is that cost), or nil when the limit forbids it.
func (p *stagingPool) get(need uint64) (b *stagingBuf, took time.Duration, err error) {
	p.mu.Lock()
	i := sort.Search(len(p.free), func(i int) bool { return uint64(len(p.free[i].mem)) >= need })
	if i < len(p.free) {
		b = p.free[i]
		p.free = append(p.free[:i], p.free[i+1:]...)
		p.mu.Unlock()
		return b, 0, nil
	}
	size := uint64(minStaging)
	for size < need {
		size *= 2
	}
	// Make room by dropping smaller free buffers.
	var drop []*stagingBuf
	for p.total+size > p.limit && len(p.free) > 0 {
		d := p.free[0]
		p.free = p.free[1:]
		p.total -= uint64(len(d.mem))
		p.count--
		drop = append(drop, d)
	}
	if p.total+size > p.limit {
		p.mu.Unlock()
		p.destroy(drop)
		return nil, 0, nil
	}
	p.total += size
	p.count++
	p.mu.Unlock()
	p.destroy(drop)

	mem, err := mapStaging(size)
	if err == nil {
		t0 := time.Now()
		if err = p.dev.Register(unsafe.Pointer(unsafe.SliceData(mem)), size); err == nil {
			return &stagingBuf{mem: mem}, time.Since(t0), nil
		}
		err = fmt.Errorf("pinning a %d-byte staging buffer: %w", size, err)
		_ = unmapStaging(mem)
	}
	p.mu.Lock()
	p.total -= size
	p.count--
	p.mu.Unlock()
	return nil, 0, err
}

// put returns b to the pool. Its copies must have completed.
func (p *stagingPool) put(b *stagingBuf) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.free), func(i int) bool { return len(p.free[i].mem) >= len(b.mem) })
	p.free = append(p.free, nil)
	copy(p.free[i+1:], p.free[i:])
	p.free[i] = b
}

// destroy unpins and unmaps buffers.
func (p *stagingPool) destroy(bs []*stagingBuf) error {
	var first error
	for _, b := range bs {
		if err := p.dev.Unregister(unsafe.Pointer(unsafe.SliceData(b.mem))); err != nil && first == nil {
			first = err
		}
		if err := unmapStaging(b.mem); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// close frees every free buffer (every buffer, once no call is running).
func (p *stagingPool) close() error {
	p.mu.Lock()
	bs := p.free
	p.free = nil
	for _, b := range bs {
		p.total -= uint64(len(b.mem))
		p.count--
	}
	p.mu.Unlock()
	return p.destroy(bs)
}

// usage is the pool's buffers and bytes.
func (p *stagingPool) usage() (int, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count, p.total
}
