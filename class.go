package pinpool

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// class is one size class: all its buffers have the same capacity. Its
// idle buffers are in its procCache; its memory is the set of its chunks.
type class struct {
	// Read on every Get and Release, written once.
	core       *core
	size       int64 // capacity of each buffer
	perChunk   int   // buffers per slab; 1 for a large class (its smallest allocation)
	chunkBytes int64 // the smallest allocation: size * perChunk
	batch      int   // buffers per allocation of the first growth
	maxBatch   int   // buffers per allocation at most: GrowBytes of them, at least batch
	// reserveBatch is the most buffers one allocation of a Reserve takes:
	// reserveAllocBytes of them, at least maxBatch.
	reserveBatch int
	cache        procCache
	_            [cacheLine]byte // keeps what slow paths write off those lines

	growMu sync.Mutex   // one growth at a time per class
	ramp   atomic.Int64 // buffers the next growth allocates: doubles per growth, back to batch on a trim

	chunks atomic.Pointer[[]*chunk] // live chunks; replaced (copy on write) under core.mu

	claims   reserveClaims // what Reserves asked to keep, and those in progress
	reserved atomic.Int64  // idle buffers Reserve asked to keep (claims, published): policy trimming spares them
	decay    atomic.Int64  // ns this class's idle memory above MaxIdle stays after its last use (see Options.IdleDecay); <= 0: never freed by decay
	decayed  atomic.Int64  // unix ns of the last decay trim; 0: none
	pending  atomic.Int64  // slots waiting on a fence
	misses   atomic.Uint64 // Gets that found no idle buffer

	// Under core.mu:
	grows      uint64 // backend allocations
	missServed uint64 // Gets served after a miss (so hits = served - missServed)
	pastServed uint64 // hand-outs counted in the slots of freed chunks
}

// newClass makes the class of buffers of size bytes. Buffers up to
// Options.SlabMax share slabs of Options.SlabSize, cut to fit the budget.
func newClass(co *core, o *Options, size int64) *class {
	c := &class{core: co, size: size, perChunk: 1}
	if o.SlabMax > 0 && size <= int64(o.SlabMax) {
		c.perChunk = int(int64(o.SlabSize) / size)
		if o.Budget > 0 {
			c.perChunk = int(min(int64(c.perChunk), o.Budget/size))
		}
		c.perChunk = max(c.perChunk, 1)
	}
	c.chunkBytes = size * int64(c.perChunk)
	c.batch = c.perChunk
	if c.perChunk == 1 {
		c.batch = int(max(1, min(int64(o.GrowCount), o.GrowBytes/size)))
	}
	// Whole slabs, or whole buffers, up to GrowBytes (and the budget).
	limit, reserveLimit := o.GrowBytes, int64(reserveAllocBytes)
	if o.Budget > 0 {
		limit, reserveLimit = min(limit, o.Budget), min(reserveLimit, o.Budget)
	}
	if gl := co.growLimit; gl > 0 {
		// The backend holds a lock for the length of each allocation.
		limit, reserveLimit = min(limit, gl), min(reserveLimit, gl)
		if c.perChunk == 1 {
			c.batch = int(max(1, min(int64(c.batch), gl/size)))
		}
	}
	c.maxBatch = max(c.batch, int(limit/c.chunkBytes)*c.perChunk)
	c.reserveBatch = max(c.maxBatch, int(reserveLimit/c.chunkBytes)*c.perChunk)
	c.ramp.Store(int64(c.batch))
	c.decay.Store(int64(o.IdleDecay))
	c.cache.init()
	return c
}

func (c *class) chunkList() []*chunk {
	if l := c.chunks.Load(); l != nil {
		return *l
	}
	return nil
}

func (c *class) setChunks(l []*chunk) { c.chunks.Store(&l) }

// newChunk carves an allocation into k idle slots, the first one in use
// when it serves a Get at once.
func (c *class) newChunk(a Allocation, mem []byte, k int, firstInUse bool) *chunk {
	ch := &chunk{alloc: a, class: c, bytes: int64(k) * c.size, slots: make([]slot, k)}
	ch.devPtr, ch.mapped = devicePointerOf(a)
	ch.huge = hugePageBytesOf(a)
	base := unsafe.Pointer(unsafe.SliceData(mem))
	for i := range ch.slots {
		s := &ch.slots[i]
		s.off = uintptr(int64(i) * c.size)
		s.ptr = unsafe.Add(base, s.off)
		s.chunk = ch
		if c.core.debug {
			poison(s, c.size)
		}
	}
	if firstInUse {
		ch.slots[0].state.Store(word(0, stInUse))
	}
	return ch
}

// findIdle claims an idle buffer wherever it is: the shared tiers of the
// cache first, then a scan of the chunks, which also finds buffers held
// in other processors' private arrays.
func (c *class) findIdle() *slot {
	if e := c.cache.getShared(); e.s != nil {
		return e.s
	}
	for _, ch := range c.chunkList() {
		for i := range ch.slots {
			if _, ok := ch.slots[i].claimAny(); ok {
				return &ch.slots[i]
			}
		}
	}
	return nil
}

// idleCount counts the idle buffers, by their slots.
func (c *class) idleCount() int {
	n := 0
	for _, ch := range c.chunkList() {
		n += idleIn(ch)
	}
	return n
}

// release makes a slot released by its user (gen is the generation it
// was handed out with) idle again and caches it. It returns false when
// the handle was not live.
func (c *class) release(s *slot, gen uint64) bool {
	if c.core.debug {
		if !s.state.CompareAndSwap(word(gen, stInUse), word(gen+1, stBusy)) {
			return false
		}
		poison(s, c.size)
		s.state.Store(word(gen+1, stIdle))
	} else if !s.state.CompareAndSwap(word(gen, stInUse), word(gen+1, stIdle)) {
		return false
	}
	c.cache.put(entry{s, gen + 1})
	c.afterIdle(s)
	return true
}

// returnIdle makes a slot the pool itself took back (a completed fence)
// idle, poisoning it first in Debug mode, and caches it in the central
// list. The caller owns the slot (it is pending), of generation gen.
func (c *class) returnIdle(s *slot, gen uint64) {
	if c.core.debug {
		s.state.Store(word(gen, stBusy))
		poison(s, c.size)
	}
	s.state.Store(word(gen, stIdle))
	c.cache.putShared(entry{s, gen})
	c.afterIdle(s)
}

// afterIdle runs after a slot became idle: it wakes Gets waiting for room
// and, once the pool is closed, frees the slot's chunk if nothing else of
// it is in use. The check is two loads from one line, inlined into
// Release; the work is in afterIdleSlow.
func (c *class) afterIdle(s *slot) {
	if co := c.core; co.waiters.Load() != 0 || co.closedFlag.Load() {
		c.afterIdleSlow(s)
	}
}

func (c *class) afterIdleSlow(s *slot) {
	c.core.budget.broadcast()
	if c.core.isClosed() {
		c.freeChunk(s.chunk, TrimClose)
	}
}

// poisonWord fills released memory in Debug mode (0xDB in every byte).
const poisonWord = 0xDBDBDBDBDBDBDBDB

// poison fills a released buffer; sizes are whole pages, so whole words.
func poison(s *slot, size int64) {
	w := unsafe.Slice((*uint64)(s.ptr), size/8)
	for i := range w {
		w[i] = poisonWord
	}
}

// checkPoison panics when memory released in Debug mode was written after
// its release. The buffer goes back to the pool (poisoned again) first, so
// a recovered panic leaks nothing.
func checkPoison(s *slot, gen uint64, size int64) {
	w := unsafe.Slice((*uint64)(s.ptr), size/8)
	for i, v := range w {
		if v != poisonWord {
			s.chunk.class.release(s, gen)
			panic(fmt.Sprintf("pinpool: use after release: bytes %d..%d of a %d-byte buffer at %p were written after Release (Options.Debug)", i*8, i*8+7, size, s.ptr))
		}
	}
}
