package cuda

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The pinned-range registry: every range this package allocated with
// cuMemHostAlloc or registered with cuMemHostRegister, kept sorted in a
// copy-on-write slice so that asynchronous copies can check their host
// memory without a driver call or a lock.
var pinned struct {
	mu    sync.Mutex             // serialises writers
	spans atomic.Pointer[[]span] // sorted by start, non-overlapping
}

type span struct{ start, end uintptr }

func addPinned(start, n uintptr) {
	pinned.mu.Lock()
	defer pinned.mu.Unlock()
	var cur []span
	if p := pinned.spans.Load(); p != nil {
		cur = *p
	}
	i, _ := slices.BinarySearchFunc(cur, start, func(s span, t uintptr) int { return cmpUintptr(s.start, t) })
	next := slices.Insert(slices.Clone(cur), i, span{start, start + n})
	pinned.spans.Store(&next)
}

func removePinned(start uintptr) {
	pinned.mu.Lock()
	defer pinned.mu.Unlock()
	p := pinned.spans.Load()
	if p == nil {
		return
	}
	i, ok := slices.BinarySearchFunc(*p, start, func(s span, t uintptr) int { return cmpUintptr(s.start, t) })
	if !ok {
		return
	}
	next := slices.Delete(slices.Clone(*p), i, i+1)
	pinned.spans.Store(&next)
}

func cmpUintptr(a, b uintptr) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// knownPinned reports whether [p, p+n) lies inside registered ranges: one,
// or several that follow each other without a gap (a large allocation
// registered in parts). A copy of such a range must be split at the parts'
// boundaries: see pinnedRun.
func knownPinned(p, n uintptr) bool {
	sp := pinned.spans.Load()
	if sp == nil || p+n < p {
		return false
	}
	s := *sp
	i := spanAt(s, p)
	if i < 0 {
		return false
	}
	for end := p + n; s[i].end < end; i++ {
		if i+1 == len(s) || s[i+1].start != s[i].end {
			return false
		}
	}
	return true
}

// spanAt returns the index of the registered range holding p, or -1.
func spanAt(s []span, p uintptr) int {
	// The last span starting at or before p.
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s[m].start <= p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 || p >= s[lo-1].end {
		return -1
	}
	return lo - 1
}

// pinnedRun returns how many of the n bytes at p one driver copy may take:
// up to the end of the registered range holding p (the driver refuses a
// copy that runs past one registration), or n when no known range holds
// p (memory of other code, which the driver judges itself).
func pinnedRun(p, n uintptr) uintptr {
	sp := pinned.spans.Load()
	if sp == nil {
		return n
	}
	s := *sp
	i := spanAt(s, p)
	if i < 0 {
		return n
	}
	return min(n, s[i].end-p)
}

// eachRun calls copy for each piece of the n bytes at host address p that
// lies in one registration (one piece in the common case), with the
// piece's offset, address and length, and stops at the first failure.
func eachRun(p, n uintptr, copy func(off, p, n uintptr) Result) Result {
	for off := uintptr(0); ; {
		ln := pinnedRun(p+off, n-off)
		if r := copy(off, p+off, ln); r != Success || off+ln >= n {
			return r
		}
		off += ln
	}
}

// pointer attributes and memory types of cuPointerGetAttribute.
const (
	pointerAttrMemoryType = 2
	memoryTypeHost        = 1
)

// checkPinned returns nil when b is page-locked host memory: first by the
// registry, else by asking the driver about its first and last byte (memory
// pinned by other code in the process). Ordinary Go memory gets ErrNotPinned.
func checkPinned(b []byte) error {
	if pinnedBytes(b) {
		return nil
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return fmt.Errorf("%w: %d bytes at %#x are pageable (use pinned memory from a pool, HostAlloc or HostRegister)", ErrNotPinned, len(b), p)
}

// pinnedBytes is checkPinned's answer without the error, which IsPinned
// does without: copiers ask it before every transfer of pageable memory.
func pinnedBytes(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if knownPinned(p, uintptr(len(b))) {
		return true
	}
	return driverPinned(p) && driverPinned(p+uintptr(len(b))-1)
}

func driverPinned(p uintptr) bool {
	if fn.cuPointerGetAttribute == 0 {
		return false
	}
	var mt uint32
	r := invoke(fn.cuPointerGetAttribute, uintptr(unsafe.Pointer(&mt)), pointerAttrMemoryType, p)
	return r == Success && mt == memoryTypeHost
}

// IsPinned reports whether b is page-locked host memory that asynchronous
// copies accept.
func IsPinned(b []byte) bool {
	if Load() != nil {
		return false
	}
	return pinnedBytes(b)
}
