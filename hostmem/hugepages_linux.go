package hostmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
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
// pages now: all of it for a hugetlb region; 0 for one on normal pages;
// for a region advised to use transparent huge pages, where the process
// may read page frames (CAP_SYS_ADMIN), the huge pages that back its whole
// huge-page ranges as /proc/self/pagemap and /proc/kpageflags show them
// (in a region of more than 1024 such ranges, 1024 evenly spread ones,
// scaled), else its AnonHugePages in /proc/self/smaps (where the kernel
// has merged the region with a neighbouring mapping, that share of the
// merged mapping's figure). The page flags cost a few small reads per
// range looked at; smaps walks every mapping up to the region's, and in a
// process that has registered much memory with CUDA (which leaves many
// mappings) that read took a large share of each 1 GiB growth of a large
// Reserve (BenchmarkArena's block sizes beside its one buffer). Call it
// once, after the region is prefaulted, not on a hot path.
func (r *Region) HugePageBytes() (int64, error) {
	switch {
	case r.unmapped.Load():
		return 0, ErrUnmapped
	case r.hugetlb:
		return int64(r.capacity), nil
	case !r.huge:
		return 0, nil
	}
	if n, ok := hugeByPageFlags(uintptr(r.base), r.capacity, hugePageSize()); ok {
		return n, nil
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("hostmem: %w", err)
	}
	defer f.Close()
	return anonHugeIn(bufio.NewReader(f), uintptr(r.base), uintptr(r.base)+uintptr(r.capacity))
}

// hugeByPageFlags counts the bytes of [base, base+n) in whole, aligned
// ranges of huge bytes that one transparent huge page backs: the first
// page of the range present and flagged THP in /proc/kpageflags, and the
// last one physically contiguous with it. Above pageFlagSamples ranges it
// looks at that many, evenly spread, and scales the count. ok is false
// where the process may not read the page frames (pagemap shows them only
// with CAP_SYS_ADMIN) or the files are missing.
func hugeByPageFlags(base uintptr, n, huge int) (bytes int64, ok bool) {
	return hugeSampled(base, n, huge, pageFlagSamples)
}

// hugeSampled is hugeByPageFlags looking at up to samples ranges.
func hugeSampled(base uintptr, n, huge, samples int) (bytes int64, ok bool) {
	if huge <= 0 {
		return 0, false
	}
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, false
	}
	defer pm.Close()
	kf, err := os.Open("/proc/kpageflags")
	if err != nil {
		return 0, false
	}
	defer kf.Close()
	page := uintptr(unix.Getpagesize())
	var b [8]byte
	read := func(f *os.File, at uint64) (uint64, bool) {
		if _, err := f.ReadAt(b[:], int64(at)); err != nil {
			return 0, false
		}
		return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56, true
	}
	// frame returns the page frame of the page at addr, 0 when it is not
	// present; ok is false when pagemap cannot be read or hides frames.
	frame := func(addr uintptr) (uint64, bool) {
		e, ok := read(pm, uint64(addr/page)*8)
		if !ok {
			return 0, false
		}
		const present, pfnMask = 1 << 63, 1<<55 - 1
		if e&present == 0 {
			return 0, true
		}
		if e&pfnMask == 0 {
			return 0, false // present without a frame: frames are hidden from this process
		}
		return e & pfnMask, true
	}
	const kpfTHP = 1 << 22
	thp := func(pfn uint64) (bool, bool) {
		f, ok := read(kf, pfn*8)
		return f&kpfTHP != 0, ok
	}
	h := uintptr(huge)
	start := (base + h - 1) &^ (h - 1)
	ranges := 0
	if end := base + uintptr(n); end >= start+h {
		ranges = int((end - start) / h)
	}
	stride := max(1, (ranges+samples-1)/samples)
	var sampled, hits int
	for i := 0; i < ranges; i += stride {
		a := start + uintptr(i)*h
		sampled++
		first, ok := frame(a)
		if !ok {
			return 0, false
		}
		if first == 0 {
			continue
		}
		last, ok := frame(a + h - page)
		if !ok {
			return 0, false
		}
		if last != first+uint64((h-page)/page) {
			continue
		}
		t, ok := thp(first)
		if !ok {
			return 0, false
		}
		if t {
			hits++
		}
	}
	if sampled == 0 {
		return 0, true
	}
	return int64(hits) * int64(ranges) / int64(sampled) * int64(h), true
}

// pageFlagSamples is how many huge-page ranges hugeByPageFlags looks at in
// one region at most: every one up to that many, evenly spread ones in a
// larger region, so that the count of a region of tens of GiB costs about
// what one of a few GiB does.
const pageFlagSamples = 1024

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
