package transfer

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// pageableMemo remembers host ranges of staged size that the driver
// reported not page-locked, for pageableFor, so that a stream of transfers
// from the same buffers asks the driver once instead of before every
// transfer: the question costs a driver call, on the transfer's critical
// path, before any lane starts (BenchmarkPacedFrames).
// Remembering "not page-locked" is safe: memory that other code pins
// meanwhile is staged instead of copied directly, which is correct, only
// slower, until the entry expires. Page-locked answers are never
// remembered, since memory that stops being page-locked must not be given
// to an asynchronous copy.
type pageableMemo struct {
	mu      sync.Mutex                  // serialises writers
	entries atomic.Pointer[[]memoEntry] // copy on write: readers take no lock
}

// memoEntry is a range [lo, hi) found not page-locked, valid until
// (nanoseconds since epoch).
type memoEntry struct {
	lo, hi, until int64
}

const (
	// pageableFor is how long an answer is remembered.
	pageableFor = time.Second
	// memoSize is the most ranges remembered: a copier's streams use a few
	// buffers each.
	memoSize = 16
)

func memoRange(b []byte) (lo, hi int64) {
	lo = int64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	return lo, lo + int64(len(b))
}

// has reports whether b lies inside a range remembered as not page-locked.
func (m *pageableMemo) has(b []byte) bool {
	es := m.entries.Load()
	if es == nil {
		return false
	}
	lo, hi := memoRange(b)
	now := int64(time.Since(epoch))
	for _, e := range *es {
		if lo >= e.lo && hi <= e.hi && now < e.until {
			return true
		}
	}
	return false
}

// add remembers b as not page-locked, replacing an expired or the oldest
// entry when the memo is full.
func (m *pageableMemo) add(b []byte) {
	lo, hi := memoRange(b)
	now := int64(time.Since(epoch))
	e := memoEntry{lo, hi, now + int64(pageableFor)}
	m.mu.Lock()
	defer m.mu.Unlock()
	var old []memoEntry
	if p := m.entries.Load(); p != nil {
		old = *p
	}
	es := make([]memoEntry, 0, min(len(old)+1, memoSize))
	es = append(es, e)
	for _, o := range old {
		// Drop the expired, those the new one covers, and the oldest past
		// the size.
		if len(es) == memoSize || now >= o.until || (o.lo >= lo && o.hi <= hi) {
			continue
		}
		es = append(es, o)
	}
	m.entries.Store(&es)
}
