package cudahost

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/pinpool/pinpool/cuda"
)

// part is one piece of pinned memory from the driver: a *cuda.HostMem from
// cuMemHostAlloc or from one cuMemHostRegister call.
type part interface {
	Len() int
	DevicePointer() (cuda.DevicePtr, error)
	Free() error
}

// unmapper is the mapping of a Register chunk: a *hostmem.Region.
type unmapper interface {
	Unmap() error
}

// Chunk is one allocation from a Backend: page-aligned pinned host memory
// that asynchronous copies accept. It has the methods of the pool's
// allocation interface (pinpool.Allocation). Its methods are safe for
// concurrent use; the memory must not be used after Free.
type Chunk struct {
	b      *Backend
	mem    []byte // len == cap == the size asked of Alloc
	parts  []part // in address order
	region unmapper
	// workers is how many goroutines Free uses to give the parts back.
	workers   int
	hugeBytes int64 // backed by huge pages when made
	dptr      uintptr
	mapped    bool
	freed     atomic.Bool
}

// Bytes returns the memory; its length is the size given to Alloc. It
// returns nil after Free.
func (c *Chunk) Bytes() []byte {
	if c.freed.Load() {
		return nil
	}
	return c.mem
}

// Pointer returns the address of the first byte, or nil after Free.
func (c *Chunk) Pointer() unsafe.Pointer {
	if c.freed.Load() {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(c.mem))
}

// HugePageBytes returns how many bytes of the chunk were backed by huge
// pages when it was made (hostmem.Region.HugePageBytes): with
// Options.HugePages, all of it from the hugetlb pool or what transparent
// huge pages the kernel gave; 0 otherwise (HostAlloc: the driver's pages;
// chunks under 64 MiB, for which it is not looked up).
func (c *Chunk) HugePageBytes() int64 { return min(c.hugeBytes, int64(len(c.mem))) }

// Registrations returns how many cuMemHostRegister calls pinned the chunk
// (1 for HostAlloc: one cuMemHostAlloc).
func (c *Chunk) Registrations() int { return len(c.parts) }

// Len returns the size given to Alloc.
func (c *Chunk) Len() int { return len(c.mem) }

// DevicePointer returns the device address of the chunk's first byte when
// the backend maps its memory (Options.Mapped), so that kernels can read and
// write it in place; the whole chunk is contiguous at that address. Without
// Mapped it returns an error wrapping cuda.ErrNotMapped; after Free,
// ErrFreed.
func (c *Chunk) DevicePointer() (uintptr, error) {
	if c.freed.Load() {
		return 0, ErrFreed
	}
	if !c.mapped {
		return 0, fmt.Errorf("cudahost: %s: the chunk is not mapped (set Options.Mapped): %w", c.b.name, cuda.ErrNotMapped)
	}
	return c.dptr, nil
}

// Free gives the memory back: cuMemFreeHost for HostAlloc; for Register,
// cuMemHostUnregister of every part, then munmap. Both synchronise with the
// device, so keep Free off hot paths, and call it only when no copy or
// kernel uses the memory any more. Free frees everything it can even when a
// step fails, and returns the failures. Freeing the last chunk of a closed
// Backend releases its primary context. A second Free returns ErrFreed.
func (c *Chunk) Free() error {
	if c.freed.Swap(true) {
		return ErrFreed
	}
	return also(c.freeMemory(), c.b.release())
}

// freeMemory unregisters or frees every part, then unmaps the region.
// Parts are given back by several goroutines, and each part's pages are
// discarded as soon as it is unregistered (in parallel; one munmap of a
// large region frees its pages on one thread), so that a large chunk is
// freed in a fraction of the time and the driver's lock is held for one
// part at a time.
func (c *Chunk) freeMemory() error {
	var errs []error
	d, discards := c.region.(discarder)
	offs := make([]int, len(c.parts))
	off := 0
	for i, p := range c.parts {
		offs[i] = off
		off += p.Len()
	}
	free := make([]part, len(c.parts))
	for i, p := range c.parts {
		free[i] = discardAfter{p, d, offs[i], discards && len(c.parts) > 1}
	}
	if err := freeParts(free, c.workers); err != nil {
		errs = append(errs, err)
	}
	if c.region != nil {
		if err := c.region.Unmap(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("cudahost: %s: freeing %d bytes: %w", c.b.name, len(c.mem), errors.Join(errs...))
}

// discarder is a region whose pages can be given back in parts before it
// is unmapped: a *hostmem.Region.
type discarder interface {
	Discard(off, n int) error
}

// discardAfter frees a part, then discards its pages.
type discardAfter struct {
	part
	d   discarder
	off int
	on  bool
}

func (p discardAfter) Free() error {
	if err := p.part.Free(); err != nil {
		return err // still registered: the pages stay until the unmap
	}
	if p.on {
		_ = p.d.Discard(p.off, p.part.Len()) // the unmap frees them anyway
	}
	return nil
}

// devicePointer returns the device address of the first part and checks that
// every later part follows it contiguously, so that one pointer covers the
// whole chunk.
func devicePointer(parts []part) (uintptr, error) {
	if len(parts) == 0 {
		return 0, fmt.Errorf("%w: no memory", ErrCannotMap)
	}
	first, err := parts[0].DevicePointer()
	if err != nil {
		return 0, fmt.Errorf("device pointer: %w", err)
	}
	off := uintptr(parts[0].Len())
	for i, p := range parts[1:] {
		d, err := p.DevicePointer()
		if err != nil {
			return 0, fmt.Errorf("device pointer of part %d: %w", i+2, err)
		}
		if uintptr(d) != uintptr(first)+off {
			return 0, fmt.Errorf("%w: registered part %d maps to %#x, not %#x right after the previous part (raise RegisterChunk)", ErrCannotMap, i+2, uintptr(d), uintptr(first)+off)
		}
		off += uintptr(p.Len())
	}
	return uintptr(first), nil
}
