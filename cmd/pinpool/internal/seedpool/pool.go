package seedpool

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Defaults of the seed design.
const (
	// DefaultGrowCount is how many blocks the seed allocates on a miss.
	DefaultGrowCount = 4
	// DefaultMaxIdle is how many idle blocks of one size the seed keeps.
	DefaultMaxIdle = 32
)

// Options tunes a Pool. The zero value is the seed's configuration.
type Options struct {
	// GrowCount is the number of blocks allocated on a miss; one is
	// returned and the rest are kept idle. Zero or negative: DefaultGrowCount.
	GrowCount int
	// MaxIdle is the most idle blocks kept per size; Free frees the excess.
	// Zero or negative: DefaultMaxIdle.
	MaxIdle int
}

// block is one allocation of the Allocator, of exactly the size of its list.
type block struct {
	buf []byte
}

// Pool is the seed's CudaMemoryPool: one mutex, a map from exact size to a
// free list of blocks, growth by GrowCount blocks on a miss and at most
// MaxIdle idle blocks per size. See the package documentation for what it
// reproduces and which seed defects it does not.
//
// The Allocator is called while the pool's mutex is held, as in the seed:
// a slow allocation (or free, when trimming) stalls every other caller of the
// pool, of every size. This is deliberate; it is what the baseline measures.
//
// All methods are safe for concurrent use.
type Pool struct {
	a         Allocator
	growCount int
	maxIdle   int

	mu   sync.Mutex
	free map[int][]*block // size -> idle blocks (used as a stack)
	out  map[*byte]*block // first byte -> outstanding block

	// Written under mu, read lock-free by the accessors.
	held   atomic.Int64
	peak   atomic.Int64
	allocs atomic.Int64
	frees  atomic.Int64
}

// New returns a pool that takes its memory from a. It panics if a is nil.
func New(a Allocator, opt Options) *Pool {
	if a == nil {
		panic("seedpool: nil Allocator")
	}
	if opt.GrowCount <= 0 {
		opt.GrowCount = DefaultGrowCount
	}
	if opt.MaxIdle <= 0 {
		opt.MaxIdle = DefaultMaxIdle
	}
	return &Pool{
		a:         a,
		growCount: opt.GrowCount,
		maxIdle:   opt.MaxIdle,
		free:      make(map[int][]*block),
		out:       make(map[*byte]*block),
	}
}

// Alloc returns a block of exactly size bytes. On a hit it pops an idle
// block of that size. On a miss it calls the Allocator GrowCount times while
// holding the pool's mutex, stopping at the first failure: the blocks it did
// get are kept (one returned, the rest idle), and the Allocator's error is
// returned only when it got none. There is no retry.
func (p *Pool) Alloc(size int) ([]byte, error) {
	if size <= 0 {
		return nil, ErrInvalidSize
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.free[size]
	if len(list) == 0 {
		var err error
		list, err = p.grow(size, list)
		if len(list) == 0 {
			return nil, err
		}
	}
	b := list[len(list)-1]
	list[len(list)-1] = nil
	p.free[size] = list[:len(list)-1]
	p.out[&b.buf[0]] = b
	return b.buf, nil
}

// grow appends up to growCount new blocks of size to list. Called with p.mu
// held. It returns the first Allocator error, if any.
func (p *Pool) grow(size int, list []*block) ([]*block, error) {
	for range p.growCount {
		p.allocs.Add(1)
		buf, err := p.a.Alloc(size)
		if err == nil && len(buf) != size {
			err = fmt.Errorf("seedpool: allocator returned %d bytes for %d", len(buf), size)
			p.freeBuf(buf)
		}
		if err != nil {
			return list, err
		}
		list = append(list, &block{buf: buf[:size:size]})
		held := p.held.Add(int64(size))
		if held > p.peak.Load() {
			p.peak.Store(held)
		}
	}
	return list, nil
}

// Free gives back a block returned by Alloc. size must be the size it was
// allocated with. b may be resliced, as long as it still starts at the
// block's first byte. If more than MaxIdle blocks of that size are then
// idle, the excess is freed through the Allocator while the pool's mutex is
// held, as in the seed; errors from the Allocator are returned, and the pool
// forgets those blocks either way.
//
// Free returns ErrUnknown when b is not an outstanding block of this pool
// (a foreign slice, or a block already freed) and ErrSizeMismatch when size
// is not the block's size; in both cases nothing changes.
func (p *Pool) Free(size int, b []byte) error {
	if cap(b) == 0 {
		return ErrUnknown
	}
	key := &b[:1][0]
	p.mu.Lock()
	defer p.mu.Unlock()
	blk, ok := p.out[key]
	if !ok {
		return ErrUnknown
	}
	if len(blk.buf) != size {
		return fmt.Errorf("%w: freeing a block of %d bytes as %d", ErrSizeMismatch, len(blk.buf), size)
	}
	delete(p.out, key)
	list := append(p.free[size], blk)
	var errs []error
	for len(list) > p.maxIdle {
		last := list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
		if err := p.freeBlock(last); err != nil {
			errs = append(errs, err)
		}
	}
	p.free[size] = list
	return errors.Join(errs...)
}

// freeBlock frees one block through the Allocator. Called with p.mu held.
func (p *Pool) freeBlock(b *block) error {
	p.held.Add(-int64(len(b.buf)))
	return p.freeBuf(b.buf)
}

// freeBuf calls the Allocator's Free and counts the call.
func (p *Pool) freeBuf(buf []byte) error {
	p.frees.Add(1)
	return p.a.Free(buf)
}

// Destroy frees every idle block through the Allocator and clears the free
// lists (the seed did not clear them, so a second destroy freed the same
// blocks again); a second Destroy is harmless. Blocks still out are not
// freed: they stay outstanding, a later Free puts them back in the lists,
// and the pool remains usable, like the seed's singleton. The returned error
// joins the Allocator's errors; the blocks are forgotten either way.
func (p *Pool) Destroy() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for size, list := range p.free {
		for _, b := range list {
			if err := p.freeBlock(b); err != nil {
				errs = append(errs, err)
			}
		}
		delete(p.free, size)
	}
	return errors.Join(errs...)
}

// Get is Alloc and Free in the shape of the Workload callback: it allocates
// a block of size bytes and returns the function that frees it. Each call
// allocates a small closure; measure the pool itself with Alloc and Free.
func (p *Pool) Get(size int) (release func() error, err error) {
	b, err := p.Alloc(size)
	if err != nil {
		return nil, err
	}
	return func() error { return p.Free(size, b) }, nil
}

// HeldBytes returns the bytes allocated from the Allocator and not freed:
// blocks in use plus idle blocks.
func (p *Pool) HeldBytes() int64 { return p.held.Load() }

// PeakHeldBytes returns the highest value HeldBytes has reached.
func (p *Pool) PeakHeldBytes() int64 { return p.peak.Load() }

// Allocations returns the number of calls made to the Allocator's Alloc,
// failed ones included.
func (p *Pool) Allocations() int64 { return p.allocs.Load() }

// Frees returns the number of calls made to the Allocator's Free.
func (p *Pool) Frees() int64 { return p.frees.Load() }

// AllocatorGet adapts a raw Allocator to the Workload callback: every get is
// an Allocator call and every release frees it, with no pool in between.
func AllocatorGet(a Allocator) func(size int) (release func() error, err error) {
	return func(size int) (func() error, error) {
		b, err := a.Alloc(size)
		if err != nil {
			return nil, err
		}
		return func() error { return a.Free(b) }, nil
	}
}
