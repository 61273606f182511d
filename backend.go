package pinpool

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
