package hostmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Huge pages. With Options.HugePages a region is backed by huge pages of
// the hugetlb pool (MAP_HUGETLB) when the system has enough of them
// reserved and free (HugePages_Free in /proc/meminfo): they are
// guaranteed, need no compaction and are faulted in at the rate the
// kernel zeroes memory. Otherwise the region is advised to use
// transparent huge pages (madvise(MADV_HUGEPAGE)), which the kernel gives
// where it can. Region.HugePageBytes says what was obtained.

// hugeTLB returns the hugetlb page size when at least size bytes (rounded
// up to it) of free huge pages are reserved, else 0.
func hugeTLB(size int) int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return hugeTLBFrom(b, size)
}

// hugeTLBFrom is hugeTLB for a /proc/meminfo text.
func hugeTLBFrom(meminfo []byte, size int) int {
	free, ok1, err1 := parseStatusKB(bytes.NewReader(meminfo), "HugePages_Free")
	pageKB, ok2, err2 := parseStatusKB(bytes.NewReader(meminfo), "Hugepagesize")
	if !ok1 || !ok2 || err1 != nil || err2 != nil || pageKB == 0 || pageKB > 1<<30 {
		return 0
	}
	page := int(pageKB) << 10
	n, ok := roundUp(size, page)
	if !ok || page&(page-1) != 0 || uint64(n/page) > free {
		return 0
	}
	return page
}

// HugeTLB reports whether the region is backed by the hugetlb pool
// (MAP_HUGETLB).
func (r *Region) HugeTLB() bool { return r.hugetlb }

// HugePageBytes returns how many bytes of the region are backed by huge
// pages now: all of it for a hugetlb region; for a region advised to use
// transparent huge pages, what the kernel's page-table scan of the region
// reports huge (the PAGEMAP_SCAN ioctl, Linux 6.7 and later), or where the
// kernel lacks it the region's AnonHugePages in /proc/self/smaps (where
// the kernel has merged the region with a neighbouring mapping, that share
// of the merged mapping's figure); 0 for one on normal pages. The scan
// walks the region's page tables only; smaps walks every mapping of the
// process, which grows with each registered piece of every region, so
// without the scan call it once, after the region is prefaulted, not on a
// hot path.
func (r *Region) HugePageBytes() (int64, error) {
	switch {
	case r.unmapped.Load():
		return 0, ErrUnmapped
	case r.hugetlb:
		return int64(r.capacity), nil
	case !r.huge:
		return 0, nil
	}
	if n, ok := hugeByScan(uintptr(r.base), r.capacity); ok {
		return n, nil
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("hostmem: %w", err)
	}
	defer f.Close()
	return anonHugeIn(bufio.NewReader(f), uintptr(r.base), uintptr(r.base)+uintptr(r.capacity))
}

// anonHugeIn sums AnonHugePages over the smaps entries overlapping
// [lo, hi), each weighted by the share of it inside the range, and stops
// at the first entry past it.
func anonHugeIn(br *bufio.Reader, lo, hi uintptr) (int64, error) {
	var total float64
	var start, end uintptr
	in := false
	for {
		line, err := br.ReadString('\n')
		if f := strings.Fields(line); len(f) > 0 {
			if a, b, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") {
				s, e1 := strconv.ParseUint(a, 16, 64)
				e, e2 := strconv.ParseUint(b, 16, 64)
				if e1 == nil && e2 == nil {
					start, end = uintptr(s), uintptr(e)
					if start >= hi {
						break
					}
					in = end > lo && e > s
				}
			} else if in && f[0] == "AnonHugePages:" && len(f) >= 2 {
				kb, perr := strconv.ParseUint(f[1], 10, 64)
				if perr != nil {
					return 0, fmt.Errorf("hostmem: smaps line %q: %w", strings.TrimSpace(line), perr)
				}
				overlap := min(end, hi) - max(start, lo)
				total += float64(kb<<10) * float64(overlap) / float64(end-start)
			}
		}
		if err != nil {
			break
		}
	}
	return int64(total), nil
}

// mapHugeTLB maps length bytes (a multiple of page) from the hugetlb pool.
func mapHugeTLB(length, page int) (unsafe.Pointer, error) {
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_HUGETLB
	if page != 2<<20 { // the default size needs no flag; others name their log2
		flags |= log2(page) << unix.MAP_HUGE_SHIFT
	}
	return unix.MmapPtr(-1, 0, nil, uintptr(length), unix.PROT_READ|unix.PROT_WRITE, flags)
}

func log2(n int) int {
	k := 0
	for n > 1 {
		n >>= 1
		k++
	}
	return k
}

// pmScanArg is the kernel's struct pm_scan_arg (PAGEMAP_SCAN).
type pmScanArg struct {
	size, flags, start, end, walkEnd, vec, vecLen, maxPages       uint64
	categoryInverted, categoryMask, categoryAnyofMask, returnMask uint64
}

// pageRegion is the kernel's struct page_region: a run of pages that
// share the categories asked for.
type pageRegion struct{ start, end, categories uint64 }

const (
	pageIsHuge = 1 << 6 // PAGE_IS_HUGE: mapped by a huge page table entry
	// pagemapScan is _IOWR('f', 16, struct pm_scan_arg).
	pagemapScan = 3<<30 | uint(unsafe.Sizeof(pmScanArg{}))<<16 | 'f'<<8 | 16
)

// hugeByScan counts the bytes of [base, base+n) that huge page table
// entries map, with the PAGEMAP_SCAN ioctl of /proc/self/pagemap, which
// any process may use on its own memory and which walks only that range.
// ok is false where the kernel has no such ioctl (before Linux 6.7) or
// the file cannot be opened.
func hugeByScan(base uintptr, n int) (total int64, ok bool) {
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	vec := make([]pageRegion, 256)
	for start, end := uint64(base), uint64(base)+uint64(n); start < end; {
		a := pmScanArg{
			size: uint64(unsafe.Sizeof(pmScanArg{})), start: start, end: end,
			vec: uint64(uintptr(unsafe.Pointer(&vec[0]))), vecLen: uint64(len(vec)),
			categoryMask: pageIsHuge, returnMask: pageIsHuge,
		}
		got, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(pagemapScan), uintptr(unsafe.Pointer(&a)))
		if errno != 0 {
			return 0, false
		}
		for _, v := range vec[:min(int(got), len(vec))] {
			total += int64(v.end - v.start)
		}
		if a.walkEnd <= start { // no progress: not a kernel that fills walk_end
			return 0, false
		}
		start = a.walkEnd
	}
	runtime.KeepAlive(vec)
	return total, true
}
