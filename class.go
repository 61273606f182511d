package pinpool

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// class is one size class: all its buffers have the same capacity. Idle
// buffers live in the per-processor shards and, beyond a shard's capacity,
// in the central list.
type class struct {
	pool       *Pool
	size       int64 // capacity of each buffer
	perChunk   int   // buffers per backend allocation
	chunkBytes int64
	shardCap   int
	shards     []shard

	mu     sync.Mutex // central list and chunk set; taken before shard locks
	free   []*slot
	low    int // smallest len(free) since the janitor last looked
	chunks map[*chunk]struct{}
	held   int64 // bytes of the chunks in the set

	growMu sync.Mutex // one growth at a time per class

	reserved atomic.Int64 // idle buffers Reserve asked to keep: policy trimming spares them

	slots      int64         // live slots: in chunks not freed, not retired (under mu)
	pending    atomic.Int64  // slots waiting on a fence
	misses     atomic.Uint64 // Gets that had to grow
	grewServed atomic.Uint64 // ... and were served by the growth
	failed     atomic.Uint64 // Gets that returned an error
	pastGens   int64         // releases counted in the generations of freed chunks (under mu)
	grows      atomic.Uint64

	// janitor state (janitor goroutine only)
	windowLow   int
	windowStart int64
}

func newClass(p *Pool, size int64) *class {
	o := &p.opt
	c := &class{pool: p, size: size, chunks: map[*chunk]struct{}{}}
	if o.SlabMax > 0 && size <= int64(o.SlabMax) {
		c.perChunk = int(int64(o.SlabSize) / size)
	} else {
		c.perChunk = 1
	}
	c.chunkBytes = size * int64(c.perChunk)
	c.shardCap = 8
	if o.MaxIdle > 0 {
		c.shardCap = min(c.shardCap, max(1, o.MaxIdle/p.nshards))
	}
	c.shards = make([]shard, p.nshards)
	for i := range c.shards {
		c.shards[i].stack = make([]*slot, 0, c.shardCap)
	}
	c.low = 0
	return c
}

// pop takes an idle buffer from the calling processor's shard, or nil.
func (c *class) pop() *slot {
	return procShard(c.shards).take()
}

// take takes the shard's private buffer, else the top of its stack, or nil.
func (sh *shard) take() *slot {
	if sh.private.Load() != nil {
		if s := sh.private.Swap(nil); s != nil {
			return s
		}
	}
	sh.mu.Lock()
	s := popLow(&sh.stack, &sh.low)
	sh.mu.Unlock()
	return s
}

// popLow pops the top of a stack of idle buffers, or nil, and lowers the
// stack's low watermark; the caller holds the stack's lock.
func popLow(stack *[]*slot, low *int) *slot {
	k := len(*stack) - 1
	if k < 0 {
		return nil
	}
	s := (*stack)[k]
	(*stack)[k] = nil
	*stack = (*stack)[:k]
	if k < *low {
		*low = k
	}
	return s
}

// release puts a released buffer back: into the processor's shard, and
// half the shard into the central list when it is full.
func (c *class) release(s *slot) {
	p := c.pool
	if p.opt.Debug {
		poison(s, c.size)
	}
	sh := procShard(c.shards)
	if sh.private.CompareAndSwap(nil, s) {
		p.afterRelease(c)
		return
	}
	sh.mu.Lock()
	if len(sh.stack) < c.shardCap {
		sh.stack = append(sh.stack, s)
		sh.mu.Unlock()
	} else {
		var spill [8]*slot
		n := copy(spill[:], sh.stack[len(sh.stack)-(c.shardCap+1)/2:])
		clear(sh.stack[len(sh.stack)-n:])
		sh.stack = append(sh.stack[:len(sh.stack)-n], s)
		if len(sh.stack) < sh.low {
			sh.low = len(sh.stack)
		}
		sh.mu.Unlock()
		c.pushCentral(spill[:n]...)
	}
	p.afterRelease(c)
}

// pushCentral adds idle buffers to the central list.
func (c *class) pushCentral(ss ...*slot) {
	c.mu.Lock()
	c.free = append(c.free, ss...)
	over := c.pool.opt.MaxIdle > 0 && len(c.free) > c.pool.opt.MaxIdle
	c.mu.Unlock()
	if over {
		c.pool.jan.kick()
	}
}

// takeCentral takes an idle buffer from the central list, or nil.
func (c *class) takeCentral() *slot {
	c.mu.Lock()
	s := popLow(&c.free, &c.low)
	c.mu.Unlock()
	return s
}

// reuse takes an idle buffer from the central list or another shard.
func (c *class) reuse() *slot {
	if s := c.takeCentral(); s != nil {
		return s
	}
	return c.steal()
}

// steal takes an idle buffer from any shard, for processors whose own shard
// is empty while others hold buffers (producer/consumer patterns).
func (c *class) steal() *slot {
	for i := range c.shards {
		if s := c.shards[i].take(); s != nil {
			return s
		}
	}
	return nil
}

// newChunk carves an allocation into slots and records it.
func (c *class) newChunk(a Allocation) *chunk {
	b := a.Bytes()
	ch := &chunk{alloc: a, class: c, bytes: c.chunkBytes, slots: make([]slot, c.perChunk)}
	if d, err := a.DevicePointer(); err == nil {
		ch.devPtr, ch.mapped = d, true
	}
	base := unsafe.Pointer(unsafe.SliceData(b))
	for i := range ch.slots {
		s := &ch.slots[i]
		s.off = uintptr(int64(i) * c.size)
		s.ptr = unsafe.Add(base, s.off)
		s.chunk = ch
		if c.pool.opt.Debug {
			poison(s, c.size)
		}
	}
	c.mu.Lock()
	c.chunks[ch] = struct{}{}
	c.held += ch.bytes
	c.slots += int64(c.perChunk)
	c.mu.Unlock()
	return ch
}

// idleCounts returns the idle buffers in the central list and all shards.
func (c *class) idleCount() int {
	c.mu.Lock()
	n := len(c.free)
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += len(sh.stack)
		if sh.private.Load() != nil {
			n++
		}
		sh.mu.Unlock()
	}
	c.mu.Unlock()
	return n
}
