package pinpool

import (
	"context"
	"fmt"
	"time"
	"unsafe"
)

// Backend is where a pool gets its memory: large page-aligned allocations
// ("chunks") that the pool carves into buffers. Allocations are slow (a
// driver call, page faults, mlock); the pool calls Alloc only when it grows
// and Free only when it trims or closes, never on the Get/Release fast path
// and never while holding a lock that Get or Release needs.
//
// Implementations: NewHostBackend (mmap + mlock, no GPU) in this package,
// and the CUDA backends in package cudahost (cuMemHostAlloc, or mmap +
// cuMemHostRegister). Backends need not import this package: any type with
// these methods will do.
type Backend interface {
	// Name describes the backend for Stats and String, e.g. "host(mlock)"
	// or "cuda:0/register".
	Name() string
	// Alloc returns a new allocation of at least size bytes (size is a
	// positive multiple of the system page size, os.Getpagesize), aligned
	// to a page, and page-locked (or as close to it as the backend can
	// do). Failure is an error, never a retry loop.
	Alloc(size int) (Allocation, error)
}

// Allocation is one chunk of memory from a Backend.
type Allocation interface {
	// Bytes is the memory; its length is the size asked of Alloc.
	Bytes() []byte
	// DevicePointer is the device address of the chunk's first byte when
	// the memory is mapped into a GPU's address space (zero-copy), or an
	// error (the pool returns ErrNotMapped) when it is not.
	DevicePointer() (uintptr, error)
	// Free returns the memory to the system. It is called exactly once,
	// after no buffer of the chunk is in use or pending.
	Free() error
}

// ContextBackend is a Backend that can make one allocation in bounded
// steps (pinning a large range takes seconds): AllocContext stops between
// steps once ctx is done, undoing what it made (the error wraps ctx's
// error), and calls progress, if not nil, with the bytes made so far,
// rising, from one goroutine at a time. The pool uses it when the backend
// has it, so that Reserve can be cancelled and report progress inside one
// large allocation and Close does not wait for a growth to finish. The
// cudahost backends have it (through CUDABackend).
type ContextBackend interface {
	Backend
	AllocContext(ctx context.Context, size int, progress func(made int)) (Allocation, error)
}

// GrowLimiter is a Backend whose allocations hold a lock that others wait
// for as long as each call lasts, so that the pool should not ask for more
// than GrowLimit bytes at once (cuMemHostAlloc: one call for the whole
// size). The pool then grows in allocations of at most that size, except
// that a single buffer larger than it is one allocation. Zero means no
// limit.
type GrowLimiter interface {
	GrowLimit() int
}

// The pool reports (Stats) what a backend and its allocations say of
// themselves through these optional methods, when they have them.
type (
	// hugePaged is an Allocation that knows how many of its bytes were
	// backed by huge pages when it was made.
	hugePaged interface{ HugePageBytes() int64 }
	// splitter is a Backend that retries a pin call the system refused
	// for its size in smaller parts, and counts it.
	splitter interface{ SplitRetries() uint64 }
)

// The pool calls its Backend only through these functions, which contain
// a backend's panics: a panic becomes an error (counted in
// Stats.BackendPanics), and the pool's budget and bookkeeping stay exact.

// backendAlloc allocates size bytes and checks what came back: at least
// size bytes, page-aligned. Bad memory is freed and reported as ErrGrow.
//
// A ContextBackend is given ctx and progress (bytes made so far); another
// backend is asked only when ctx is not done yet.
func (co *core) backendAlloc(ctx context.Context, size int64, progress func(int64)) (a Allocation, mem []byte, took time.Duration, err error) {
	t0 := time.Now()
	defer func() {
		took = time.Since(t0)
		if r := recover(); r != nil {
			co.backendPanics.Add(1)
			if a != nil {
				co.backendFree(a)
			}
			a, mem = nil, nil
			err = fmt.Errorf("%w: %d bytes from %s: the backend panicked: %v", ErrGrow, size, co.backendName, r)
		}
		if err != nil {
			co.failures.Add(1)
		}
	}()
	if cb, ok := co.backend.(ContextBackend); ok {
		var report func(int)
		if progress != nil {
			report = func(n int) { progress(int64(n)) }
		}
		a, err = cb.AllocContext(ctx, int(size), report)
	} else if err = ctx.Err(); err == nil {
		a, err = co.backend.Alloc(int(size))
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%w: %d bytes from %s: %w", ErrGrow, size, co.backendName, err)
	}
	if a == nil {
		return nil, nil, 0, fmt.Errorf("%w: %d bytes from %s: the backend returned no allocation and no error", ErrGrow, size, co.backendName)
	}
	mem = a.Bytes()
	switch {
	case int64(len(mem)) < size:
		co.backendFree(a)
		return nil, nil, 0, fmt.Errorf("%w: backend %s returned %d bytes, asked %d", ErrGrow, co.backendName, len(mem), size)
	case uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%uintptr(co.page) != 0:
		co.backendFree(a)
		return nil, nil, 0, fmt.Errorf("%w: backend %s returned memory at %p, not page-aligned", ErrGrow, co.backendName, unsafe.SliceData(mem))
	}
	return a, mem[:size], 0, nil
}

// backendFree frees an allocation; a failure or a panic is counted in
// Stats.FreeFailures and returned.
func (co *core) backendFree(a Allocation) (err error) {
	defer func() {
		if r := recover(); r != nil {
			co.backendPanics.Add(1)
			err = fmt.Errorf("pinpool: freeing memory of %s: the backend panicked: %v", co.backendName, r)
		}
		if err != nil {
			co.freeFailures.Add(1)
		}
	}()
	if err := a.Free(); err != nil {
		return fmt.Errorf("pinpool: freeing memory of %s: %w", co.backendName, err)
	}
	return nil
}

// backendNameOf reads a backend's Name once, for Stats and errors.
func backendNameOf(b Backend) (name string) {
	defer func() {
		if r := recover(); r != nil {
			name = fmt.Sprintf("%T (Name panicked)", b)
		}
	}()
	return b.Name()
}

// devicePointerOf asks an allocation for its device address; an error or
// a panic means it is not mapped.
func devicePointerOf(a Allocation) (d uintptr, ok bool) {
	defer func() {
		if recover() != nil {
			d, ok = 0, false
		}
	}()
	d, err := a.DevicePointer()
	return d, err == nil
}

// growLimitOf asks a backend for its GrowLimit; a panic means none.
func growLimitOf(g GrowLimiter) (n int) {
	defer func() {
		if recover() != nil {
			n = 0
		}
	}()
	return g.GrowLimit()
}

// hugePageBytesOf asks an allocation how much of it huge pages back; an
// allocation that does not say, or panics, counts 0.
func hugePageBytesOf(a Allocation) (n int64) {
	h, ok := a.(hugePaged)
	if !ok {
		return 0
	}
	defer func() {
		if recover() != nil {
			n = 0
		}
	}()
	return max(0, h.HugePageBytes())
}

// splitRetriesOf asks a backend how many pin calls it split; 0 when it
// does not say or panics.
func splitRetriesOf(b Backend) (n uint64) {
	s, ok := b.(splitter)
	if !ok {
		return 0
	}
	defer func() {
		if recover() != nil {
			n = 0
		}
	}()
	return s.SplitRetries()
}
