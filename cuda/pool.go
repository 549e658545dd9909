package cuda

import (
	"errors"
	"math/bits"
)

// minClass is the smallest block of the pool, 2⁸ = 256 bytes (the driver's alignment).
const minClass = 8

// PoolStats are the memory pool's counters.
type PoolStats struct {
	Allocs      int    // cuMemAlloc calls
	Reuses      int    // requests served from the cache
	Frees       int    // blocks returned to the pool
	InUse       uint64 // bytes handed out (by size class)
	Cached      uint64 // bytes held for reuse
	Trims       int    // cache releases (TrimPool, or before retrying a failed allocation)
	Outstanding int    // blocks handed out and not yet freed
}

// pool caches device blocks in power-of-two size classes: a request of n bytes takes a block
// of 2^⌈log₂ n⌉ bytes (at least 256), reused from that class's free list when one is there.
// Only the device goroutine touches it.
type pool struct {
	cache [64][]devPtr
	live  map[devPtr]int // class of every handed-out block
	stats PoolStats
}

func classOf(n int) int {
	c := bits.Len(uint(n - 1))
	return max(c, minClass)
}

func (p *pool) alloc(d *Device, n int) (Buffer, error) {
	c := classOf(n)
	if c >= 48 {
		return Buffer{}, &Error{Op: "cuMemAlloc_v2", Code: cudaErrOutOfMemory, Name: "request too large", Kind: ErrOutOfMemory}
	}
	if p.live == nil {
		p.live = map[devPtr]int{}
	}
	size := uint64(1) << c
	if l := p.cache[c]; len(l) > 0 {
		ptr := l[len(l)-1]
		p.cache[c] = l[:len(l)-1]
		p.stats.Reuses++
		p.stats.Cached -= size
		return p.hand(ptr, n, c), nil
	}
	var ptr devPtr
	err := d.check("cuMemAlloc_v2", d.drv.memAlloc(&ptr, size), nil)
	if errors.Is(err, ErrOutOfMemory) && p.stats.Cached > 0 {
		if terr := p.trim(d); terr != nil {
			return Buffer{}, terr
		}
		err = d.check("cuMemAlloc_v2", d.drv.memAlloc(&ptr, size), nil)
	}
	if err != nil {
		return Buffer{}, err
	}
	p.stats.Allocs++
	return p.hand(ptr, n, c), nil
}

func (p *pool) hand(ptr devPtr, n, c int) Buffer {
	p.live[ptr] = c
	p.stats.InUse += uint64(1) << c
	p.stats.Outstanding++
	return Buffer{ptr: ptr, bytes: n, class: c}
}

func (p *pool) put(d *Device, b Buffer) error {
	c, ok := p.live[b.ptr]
	if !ok {
		return errors.New("cuda: Free of a buffer that is not live in this device's pool")
	}
	delete(p.live, b.ptr)
	p.cache[c] = append(p.cache[c], b.ptr)
	p.stats.Frees++
	p.stats.Outstanding--
	p.stats.InUse -= uint64(1) << c
	p.stats.Cached += uint64(1) << c
	return nil
}

// trim frees every cached block. Blocks are freed only after the stream has drained, since
// queued kernels may still use a block returned to the cache.
func (p *pool) trim(d *Device) error {
	if err := d.check("cuStreamSynchronize", d.drv.streamSynchronize(d.stream), ErrLaunch); err != nil {
		return err
	}
	var first error
	for c := range p.cache {
		for _, ptr := range p.cache[c] {
			if err := d.check("cuMemFree_v2", d.drv.memFree(ptr), nil); err != nil && first == nil {
				first = err
			}
		}
		p.cache[c] = p.cache[c][:0]
	}
	p.stats.Cached = 0
	p.stats.Trims++
	return first
}

// release frees everything, live blocks included (Close).
func (p *pool) release(d *Device) {
	if d.stream != 0 {
		d.drv.streamSynchronize(d.stream)
	}
	for c := range p.cache {
		for _, ptr := range p.cache[c] {
			d.drv.memFree(ptr)
		}
		p.cache[c] = nil
	}
	for ptr := range p.live {
		d.drv.memFree(ptr)
	}
	p.live = nil
	p.stats.Cached, p.stats.InUse, p.stats.Outstanding = 0, 0, 0
}
