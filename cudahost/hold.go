package cudahost

import "time"

// A registration holds the driver's lock for its whole length, and that
// length grows with the pages it pins: a RegisterChunk piece on huge pages
// takes well under a millisecond, the same piece on 4 KiB pages
// (SmallPages, or memory too fragmented for the kernel to find huge pages)
// several. So a piece is registered in calls sized to hold the lock about
// lockHold each, at the rate of the call before (lockGate.fit): the
// neighbour's copies that wait for the lock wait about one call, whatever
// the pages. A call slowed by something else makes only the next one
// smaller. `pinpool arena` measures what a neighbour's copies wait
// (pool+register+small beside pool).

// lockHold is the time one registration call is sized to hold the
// driver's lock: a neighbour's copy waits about that long at worst, below
// the millisecond issue 35 bounds its 99th percentile by.
const lockHold = 750 * time.Microsecond

// record notes that a call on n bytes (0: a call that is not sized, such
// as a free) took d, for fit.
func (g *lockGate) record(n int, d time.Duration) {
	if n > 0 && d > 0 {
		g.fits.Store(int64(float64(n) * float64(lockHold) / float64(d)))
	}
}

// fit is the size of the next registration call for left bytes: all of
// them when no call was measured yet or they fit in lockHold at the last
// call's rate; else left shared evenly among the calls that do, each a
// multiple of align (at least one align).
func (g *lockGate) fit(left, align int) int {
	f := int(min(g.fits.Load(), int64(left)))
	if f <= 0 || f >= left {
		return left
	}
	calls := (left + f - 1) / f
	n := (left/calls + align - 1) / align * align
	return min(max(n, align), left)
}
