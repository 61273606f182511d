package hostmem

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Map returns an anonymous private mapping of size bytes (rounded up to whole
// pages for Cap), readable and writable, bound to a NUMA node and advised to
// use huge pages if opt asks, and prefaulted in parallel so that every page is
// backed by memory when Map returns (madvise(MADV_POPULATE_WRITE) per part,
// or one written byte per page on kernels before 5.14). The region is not locked; the CUDA
// register backend locks it with cuMemHostRegister instead.
//
// Errors wrap ErrInvalidSize for size <= 0 (or too large to round), ErrNUMA
// when the binding fails, and the errno of a failed mmap or prefault. Nothing
// is left mapped on failure.
func Map(size int, opt Options) (*Region, error) {
	return newRegion(size, opt, false)
}

// Alloc is Map followed by mlock: it returns locked (page-locked, pinned)
// memory that counts towards RLIMIT_MEMLOCK and VmLck. When mlock fails with
// ENOMEM, EPERM or EAGAIN the error wraps ErrLockLimit and states the limit,
// the size asked for and what is already locked. Nothing is left mapped on
// failure.
func Alloc(size int, opt Options) (*Region, error) {
	return newRegion(size, opt, true)
}

// maxNUMANodes bounds the node number: mbind reads at most one page of node
// mask bits.
const maxNUMANodes = 1 << 15

func newRegion(size int, opt Options, lock bool) (*Region, error) {
	r, err := newRegionLazy(size, opt)
	if err != nil {
		return nil, err
	}
	page := unix.Getpagesize()
	mem := unsafe.Slice((*byte)(r.base), r.capacity)
	fail := func(err error) (*Region, error) {
		_ = unix.MunmapPtr(r.base, uintptr(r.capacity))
		return nil, err
	}
	align := page
	if r.huge && r.capacity >= hugePageSize() {
		align = hugePageSize()
	}
	if err := prefault(mem, page, align, opt.PrefaultWorkers); err != nil {
		return fail(err)
	}
	if err := r.CheckNode(); err != nil {
		return fail(err)
	}
	if lock {
		if err := unix.Mlock(mem); err != nil {
			return fail(lockError(r.capacity, err))
		}
		r.locked = true
	}
	return r, nil
}

// newRegionLazy maps, binds and advises a region, and backs none of it.
func newRegionLazy(size int, opt Options) (*Region, error) {
	page := unix.Getpagesize()
	capacity, ok := roundUp(size, page)
	if size <= 0 || !ok {
		return nil, fmt.Errorf("%w: %d bytes", ErrInvalidSize, size)
	}
	node := -1
	if opt.BindNUMA {
		if opt.NUMANode < 0 || opt.NUMANode >= maxNUMANodes {
			return nil, fmt.Errorf("%w %d: node number out of range", ErrNUMA, opt.NUMANode)
		}
		node = opt.NUMANode
	}
	huge := 0
	if opt.HugePages {
		huge = hugePageSize()
		if tlb := hugeTLB(capacity); tlb > 0 {
			if n, ok := roundUp(capacity, tlb); ok {
				if p, err := mapHugeTLB(n, tlb); err == nil {
					r := &Region{base: p, size: size, capacity: n, node: node, huge: true, hugetlb: true}
					return r, r.bind(node)
				}
			}
			// Another mapping took the free pages meanwhile: fall back to
			// transparent huge pages.
		}
	}
	base, err := mapAligned(capacity, huge, page)
	if err != nil {
		return nil, fmt.Errorf("hostmem: mmap of %d bytes: %w", capacity, err)
	}
	r := &Region{base: base, size: size, capacity: capacity, node: node}
	if err := r.bind(node); err != nil {
		return nil, err
	}
	if opt.HugePages {
		r.huge = unix.Madvise(unsafe.Slice((*byte)(base), capacity), unix.MADV_HUGEPAGE) == nil
	}
	return r, nil
}

// bind binds a new region to node (none when node < 0); on failure it
// unmaps the region.
func (r *Region) bind(node int) error {
	if node < 0 {
		return nil
	}
	if err := mbind(unsafe.Slice((*byte)(r.base), r.capacity), node); err != nil {
		_ = unix.MunmapPtr(r.base, uintptr(r.capacity))
		return fmt.Errorf("%w %d: mbind: %w", ErrNUMA, node, err)
	}
	return nil
}

// release unlocks and unmaps the region; Unmap guarantees it runs once.
func (r *Region) release() error {
	var unlockErr error
	if r.locked {
		// munmap would drop the lock too; unlocking first keeps the
		// accounting explicit and reports a failure separately.
		if err := unix.Munlock(unsafe.Slice((*byte)(r.base), r.capacity)); err != nil {
			unlockErr = fmt.Errorf("hostmem: munlock: %w", err)
		}
	}
	if err := unix.MunmapPtr(r.base, uintptr(r.capacity)); err != nil {
		return fmt.Errorf("hostmem: munmap of %d bytes: %w", r.capacity, err)
	}
	return unlockErr
}

// roundUp rounds n up to a multiple of the power of two align; ok is false on
// overflow.
func roundUp(n, align int) (int, bool) {
	r := (n + align - 1) &^ (align - 1)
	return r, r >= n
}

// mapAligned maps length bytes (a page multiple). When align is larger than a
// page and length holds at least one align unit, the start is aligned to
// align by over-mapping and trimming, so that transparent huge pages can back
// the whole region.
func mapAligned(length, align, page int) (unsafe.Pointer, error) {
	const prot = unix.PROT_READ | unix.PROT_WRITE
	const flags = unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	over := length + align - page
	if align <= page || length < align || over < length {
		return unix.MmapPtr(-1, 0, nil, uintptr(length), prot, flags)
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(over), prot, flags)
	if err != nil {
		return nil, err
	}
	addr := uintptr(p)
	head := int((addr+uintptr(align-1))&^uintptr(align-1) - addr) // bytes up to the aligned start
	if head > 0 {
		if err := unix.MunmapPtr(p, uintptr(head)); err != nil {
			_ = unix.MunmapPtr(p, uintptr(over))
			return nil, err
		}
	}
	start := unsafe.Add(p, head)
	if tail := over - head - length; tail > 0 {
		if err := unix.MunmapPtr(unsafe.Add(start, length), uintptr(tail)); err != nil {
			_ = unix.MunmapPtr(start, uintptr(over-head))
			return nil, err
		}
	}
	return start, nil
}

// mbind applies MPOL_BIND to node for mem. x/sys/unix does not wrap mbind.
func mbind(mem []byte, node int) error {
	const wordBits = int(unsafe.Sizeof(uint(0)) * 8) // C unsigned long
	mask := make([]uint, node/wordBits+1)
	mask[node/wordBits] = 1 << (node % wordBits)
	// The kernel uses maxnode-1 bits of the mask.
	maxnode := uintptr(len(mask)*wordBits + 1)
	_, _, errno := unix.Syscall6(unix.SYS_MBIND,
		uintptr(unsafe.Pointer(unsafe.SliceData(mem))), uintptr(len(mem)),
		unix.MPOL_BIND, uintptr(unsafe.Pointer(&mask[0])), maxnode, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// hugePageSize is the transparent huge page size (PMD size): 2 MiB on x86-64
// and on arm64 with 4 KiB pages, 32 MiB or 512 MiB with larger base pages.
var hugePageSize = sync.OnceValue(func() int {
	const fallback = 2 << 20
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
	if err != nil {
		return fallback
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= unix.Getpagesize() || n&(n-1) != 0 {
		return fallback
	}
	return n
})
