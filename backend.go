package pinpool

import "context"

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
	// positive multiple of 4096), page-aligned, and page-locked (or as
	// close to it as the backend can do). Failure is an error, never a
	// retry loop.
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
