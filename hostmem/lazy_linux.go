package hostmem

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MapLazy is Map without the prefault: the mapping is made, bound to a NUMA
// node and advised to use huge pages as opt asks, but no page is backed
// until the caller prefaults it (Region.Prefault) or touches it. It is for
// callers that prefault a large region in parts and overlap that with other
// work on the parts already done, such as registering them with the driver.
// opt.PrefaultWorkers is ignored. Errors are Map's; nothing is left mapped
// on failure.
func MapLazy(size int, opt Options) (*Region, error) {
	return newRegionLazy(size, opt)
}

// Prefault backs the pages of [off, off+n) of the region now, as Map does
// for the whole region, on the calling goroutine. The range is widened to
// whole pages. Several goroutines may prefault disjoint ranges at once.
// Errors wrap ErrInvalidSize for a range outside the region, and the errno
// of a failed madvise (ENOMEM when the memory, or the bound node, runs out).
func (r *Region) Prefault(off, n int) error {
	mem, err := r.pageRange(off, n)
	if err != nil {
		return err
	}
	return prefaultPart(mem, unix.Getpagesize())
}

// Discard gives the memory of [off, off+n) back to the system
// (madvise(MADV_DONTNEED)) while the mapping stays: later reads see zeros.
// Several goroutines may discard disjoint ranges at once, which frees a
// large region faster than one munmap. It must not be called on a locked
// region's range while it is locked or registered with a driver.
func (r *Region) Discard(off, n int) error {
	mem, err := r.pageRange(off, n)
	if err != nil {
		return err
	}
	if err := unix.Madvise(mem, unix.MADV_DONTNEED); err != nil {
		return fmt.Errorf("hostmem: discarding %d bytes: %w", len(mem), err)
	}
	return nil
}

// pageRange returns [off, off+n) of the mapping widened to whole pages.
func (r *Region) pageRange(off, n int) ([]byte, error) {
	if r.unmapped.Load() {
		return nil, ErrUnmapped
	}
	if off < 0 || n <= 0 || off > r.capacity || n > r.capacity-off {
		return nil, fmt.Errorf("%w: range [%d, +%d) of a %d-byte region", ErrInvalidSize, off, n, r.capacity)
	}
	page := unix.Getpagesize()
	start := off &^ (page - 1)
	end, _ := roundUp(off+n, page)
	end = min(end, r.capacity)
	return unsafe.Slice((*byte)(unsafe.Add(r.base, start)), end-start), nil
}
