package cudahost

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinpool/pinpool/internal/pause"
)

// lockGate spaces the backend's calls that hold the driver's lock for
// their whole length (cuMemHostRegister, cuMemHostUnregister,
// cuMemHostAlloc, cuMemFreeHost). Back to back, such calls keep the lock
// nearly all the time, and another goroutine's copy waits for many of them
// in a row: the lock is not handed out in turn, and a thread woken when it
// is released runs a while later, by when the next call has taken it.
// So the calls run one at a time, and after each the gate stays shut for
// a pause (a quarter of the call's time, at least the backend's minimum),
// in which waiting calls of other code get the lock. The pause is waited
// with package pause: time.Sleep would stretch it to about a millisecond
// when nothing else runs (BenchmarkLockGate measures the gap between two
// gated calls). BenchmarkArena and `pinpool arena` measure the pause
// against the neighbour's copies; an execution trace of BenchmarkArena
// (-test.trace, each neighbour copy a region) shows what a slow copy
// waited for: in the driver, through the calls whose pauses it woke too
// late to use.
type lockGate struct {
	mu    sync.Mutex
	next  time.Time     // no gated call starts before this
	pause time.Duration // the least pause after a call; < 0: no gate
	fits  atomic.Int64  // bytes a registration of lockHold pins, at the last one's rate (fit)
}

// do runs f, a call that is not sized (see record), through the gate.
func (g *lockGate) do(f func()) { g.sized(0, f) }

// sized runs f, a call on n bytes, through the gate, and records its time.
func (g *lockGate) sized(n int, f func()) {
	if g.pause < 0 {
		t0 := time.Now()
		f()
		g.record(n, time.Since(t0))
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	pause.Until(g.next)
	t0 := time.Now()
	f()
	end := time.Now()
	g.record(n, end.Sub(t0))
	g.next = end.Add(max(g.pause, end.Sub(t0)/4))
}

// gated calls f, a call on n bytes (0: not sized), through the gate and
// returns what it returns.
func gated[T any](g *lockGate, n int, f func() (T, error)) (v T, err error) {
	g.sized(n, func() { v, err = f() })
	return v, err
}

// gatedPart is a part whose Free goes through the gate.
type gatedPart struct {
	part
	g *lockGate
}

func (p gatedPart) Free() error {
	var err error
	p.g.do(func() { err = p.part.Free() })
	return err
}

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
	n := ((left+calls-1)/calls + align - 1) / align * align // rounded up: calls of n cover left
	return min(max(n, align), left)
}
