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
// against the neighbour's copies.
type lockGate struct {
	mu    sync.Mutex
	next  time.Time     // no gated call starts before this
	pause time.Duration // the least pause after a call; < 0: no gate
	fits  atomic.Int64  // bytes a registration of lockHold pins, at the last one's rate (hold.go)
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
