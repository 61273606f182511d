package seedpool

import (
	"errors"
	"fmt"
	"sync"
)

// Errors returned by this package; compare with errors.Is.
var (
	// ErrInvalidSize is returned for a size that is not positive.
	ErrInvalidSize = errors.New("seedpool: invalid size")
	// ErrUnknown is returned when freeing memory that did not come from
	// this pool or allocator, or that is not outstanding.
	ErrUnknown = errors.New("seedpool: unknown pointer")
	// ErrDoubleFree is returned by FakeAllocator.Free for memory that it
	// allocated and that was already freed.
	ErrDoubleFree = errors.New("seedpool: double free")
	// ErrSizeMismatch is returned by Pool.Free when the size passed does
	// not match the size of the block.
	ErrSizeMismatch = errors.New("seedpool: size does not match the block")
	// ErrInjected is the failure that FakeAllocator injects.
	ErrInjected = errors.New("seedpool: injected allocation failure")
)

// Allocator is the raw memory source of the baseline pool: in benchmarks the
// same backend as the real pool (locked host memory, cuMemHostAlloc), in
// tests a [FakeAllocator]. Alloc returns exactly size bytes; Free takes a
// slice returned by Alloc (the same first byte) and releases it. Both may be
// called from several goroutines at once.
type Allocator interface {
	Alloc(size int) ([]byte, error)
	Free(b []byte) error
}

// FuncAllocator adapts an allocation function that hands back its own
// release function (the shape of pinpool's Backend: an Allocation with
// Bytes and Free) to the Allocator interface. It remembers the release
// function of every live allocation by its first byte.
//
// The zero value is not usable; build one with NewFuncAllocator.
type FuncAllocator struct {
	alloc func(size int) ([]byte, func() error, error)
	align int

	mu   sync.Mutex
	live map[*byte]func() error
}

// NewFuncAllocator returns an Allocator over alloc. When align > 1, the size
// asked of alloc is rounded up to a multiple of align (a backend that wants
// page multiples) and the slice handed out is cut to the exact size asked.
func NewFuncAllocator(alloc func(size int) ([]byte, func() error, error), align int) *FuncAllocator {
	return &FuncAllocator{alloc: alloc, align: align, live: make(map[*byte]func() error)}
}

// Chunk is memory that frees itself, such as a pinpool.Allocation.
type Chunk interface {
	Bytes() []byte
	Free() error
}

// ChunkAllocator returns an Allocator over a backend's allocation function
// (pinpool.Backend's Alloc), asking it for whole pages, so that the seed
// design runs on the same memory as the pool it is compared with.
func ChunkAllocator[C Chunk](alloc func(size int) (C, error)) *FuncAllocator {
	return NewFuncAllocator(func(n int) ([]byte, func() error, error) {
		c, err := alloc(n)
		if err != nil {
			return nil, nil, err
		}
		return c.Bytes(), c.Free, nil
	}, 4096)
}

// Alloc implements Allocator.
func (f *FuncAllocator) Alloc(size int) ([]byte, error) {
	if size <= 0 {
		return nil, ErrInvalidSize
	}
	n := size
	if f.align > 1 {
		n = (size + f.align - 1) / f.align * f.align
	}
	b, free, err := f.alloc(n)
	if err != nil {
		return nil, err
	}
	if len(b) < size || free == nil {
		if free != nil {
			_ = free()
		}
		return nil, fmt.Errorf("seedpool: allocation function returned %d bytes for %d", len(b), n)
	}
	b = b[:size:size]
	f.mu.Lock()
	f.live[&b[0]] = free
	f.mu.Unlock()
	return b, nil
}

// Free implements Allocator. It returns ErrUnknown for memory that this
// allocator did not hand out or already freed.
func (f *FuncAllocator) Free(b []byte) error {
	if cap(b) == 0 {
		return ErrUnknown
	}
	key := &b[:1][0]
	f.mu.Lock()
	free, ok := f.live[key]
	delete(f.live, key)
	f.mu.Unlock()
	if !ok {
		return ErrUnknown
	}
	return free()
}

// Live returns how many allocations are live (allocated and not freed).
func (f *FuncAllocator) Live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}
