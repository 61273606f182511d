package hostmem

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// numaSamples is how many pages of a bound region are checked.
const numaSamples = 32

// pageNodes writes into nodes the NUMA node of the page at each address
// (move_pages with no target nodes only reports where the pages are), or a
// negative errno for a page it cannot tell. Tests replace it.
var pageNodes = func(addrs []uintptr, nodes []int32) error {
	_, _, errno := unix.Syscall6(unix.SYS_MOVE_PAGES, 0, uintptr(len(addrs)),
		uintptr(unsafe.Pointer(&addrs[0])), 0, uintptr(unsafe.Pointer(&nodes[0])), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// CheckNode verifies, on a sample of its pages spread over the whole
// region, that a region bound to a NUMA node (Options.BindNUMA) lies on
// that node once its pages are backed. It is nil for an unbound region.
// An error wraps ErrNUMA and names the first page found elsewhere. Map and
// Alloc check their regions; callers that prefault a MapLazy region
// themselves call it afterwards.
func (r *Region) CheckNode() error {
	if r.node < 0 || r.unmapped.Load() {
		return nil
	}
	page := unix.Getpagesize()
	pages := r.capacity / page
	n := min(numaSamples, pages)
	addrs := make([]uintptr, n)
	for i := range addrs {
		off := 0
		if n > 1 {
			off = i * (pages - 1) / (n - 1) * page // the first and last page included
		}
		addrs[i] = uintptr(r.base) + uintptr(off)
	}
	nodes := make([]int32, n)
	if err := pageNodes(addrs, nodes); err != nil {
		return fmt.Errorf("%w %d: checking where the pages are (move_pages): %w", ErrNUMA, r.node, err)
	}
	for i, nd := range nodes {
		if int(nd) != r.node {
			off := addrs[i] - uintptr(r.base)
			if nd < 0 {
				return fmt.Errorf("%w %d: the page at offset %d of %d bytes cannot be located: %w", ErrNUMA, r.node, off, r.capacity, unix.Errno(-nd))
			}
			return fmt.Errorf("%w %d: the page at offset %d of %d bytes is on node %d", ErrNUMA, r.node, off, r.capacity, nd)
		}
	}
	return nil
}
