package hostmem

import (
	"sync/atomic"
	"unsafe"
)

// Region is one anonymous memory mapping returned by Map or Alloc. Its
// accessors are safe for concurrent use; the memory itself must not be used
// after Unmap.
type Region struct {
	base     unsafe.Pointer // start of the mapping
	size     int            // requested size
	capacity int            // mapped size, whole pages
	locked   bool
	huge     bool // madvise(MADV_HUGEPAGE) accepted
	hugetlb  bool // backed by the hugetlb pool (MAP_HUGETLB)
	node     int  // NUMA node bound to, or -1
	unmapped atomic.Bool
}

// Bytes returns the requested size of memory as a slice (len == Len(),
// cap == Cap()). It returns nil after Unmap.
func (r *Region) Bytes() []byte {
	if r.unmapped.Load() {
		return nil
	}
	return unsafe.Slice((*byte)(r.base), r.capacity)[:r.size:r.capacity]
}

// Len returns the size that was asked for.
func (r *Region) Len() int { return r.size }

// Cap returns the mapped size: Len rounded up to whole pages. This is the
// length to hand to calls that work on whole pages, such as
// cuMemHostRegister.
func (r *Region) Cap() int { return r.capacity }

// Pointer returns the start of the mapping; it is page aligned (huge page
// aligned when HugePages was accepted and the region holds at least one huge
// page). It returns nil after Unmap.
func (r *Region) Pointer() unsafe.Pointer {
	if r.unmapped.Load() {
		return nil
	}
	return r.base
}

// Locked reports whether the region is locked in memory (made by Alloc).
func (r *Region) Locked() bool { return r.locked }

// NUMANode returns the NUMA node the region is bound to, or -1 when it is not
// bound.
func (r *Region) NUMANode() int { return r.node }

// HugePages reports whether the kernel accepted madvise(MADV_HUGEPAGE) for the
// region.
func (r *Region) HugePages() bool { return r.huge }

// Unmap unlocks (if locked) and unmaps the region. A second call, or a call
// racing with the first, returns ErrUnmapped and does nothing. The memory
// must not be used after Unmap; slices from Bytes become invalid.
func (r *Region) Unmap() error {
	if !r.unmapped.CompareAndSwap(false, true) {
		return ErrUnmapped
	}
	return r.release()
}
