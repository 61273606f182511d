package pinpool

import (
	"context"
	"sync"
	"testing"
	"time"
)

// slowFreeBackend is a fakeBackend whose Frees wait, so that a test can see
// how many run at once: the first `barrier` of them wait until that many
// are in flight together (or until a generous bound passes, which the test
// then reports), and every Free records the most in flight.
type slowFreeBackend struct {
	*fakeBackend
	barrier int

	mu       sync.Mutex
	cond     *sync.Cond
	inFlight int
	maxSeen  int
	entered  int
	timedOut bool
}

func newSlowFree(barrier int) *slowFreeBackend {
	b := &slowFreeBackend{fakeBackend: newFake(), barrier: barrier}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *slowFreeBackend) Alloc(size int) (Allocation, error) {
	a, err := b.fakeBackend.Alloc(size)
	if err != nil {
		return nil, err
	}
	return slowFreeAlloc{a, b}, nil
}

type slowFreeAlloc struct {
	Allocation
	b *slowFreeBackend
}

func (a slowFreeAlloc) Free() error {
	b := a.b
	b.mu.Lock()
	b.inFlight++
	b.entered++
	b.maxSeen = max(b.maxSeen, b.inFlight)
	b.cond.Broadcast()
	if b.entered <= b.barrier {
		deadline := time.Now().Add(10 * time.Second)
		stop := time.AfterFunc(10*time.Second, func() { b.mu.Lock(); b.cond.Broadcast(); b.mu.Unlock() })
		for b.maxSeen < b.barrier && !b.timedOut {
			if time.Now().After(deadline) {
				b.timedOut = true
				break
			}
			b.cond.Wait()
		}
		stop.Stop()
	}
	b.mu.Unlock()
	err := a.Allocation.Free()
	b.mu.Lock()
	b.inFlight--
	b.mu.Unlock()
	return err
}

// TestFreeInParallel checks the promise of Close and Trim for an arena of
// many allocations: they are given back to the backend side by side,
// freeWorkers at a time and never more, and every one exactly once (the
// backend holds nothing afterwards, the budget is whole again). The Frees
// wait for each other, so a pool that freed one at a time would fail here
// (after a bound), whatever the scheduling.
func TestFreeInParallel(t *testing.T) {
	const size, count = 2 << 20, 3*freeWorkers + 1
	for _, how := range []string{"Close", "Trim"} {
		t.Run(how, func(t *testing.T) {
			b := newSlowFree(freeWorkers)
			// One buffer per allocation, so that count allocations make the arena.
			p, err := New(Options{Backend: b, GrowCount: 1, GrowBytes: size, MinAvailable: -1, Budget: 2 * count * size})
			if err != nil {
				t.Fatal(err)
			}
			bufs := make([]Buffer, count)
			for i := range bufs {
				if bufs[i], err = p.Get(context.Background(), size); err != nil {
					t.Fatal(err)
				}
			}
			for _, buf := range bufs {
				if err := buf.Release(); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, allocs, _ := b.stats(); allocs != count {
				t.Fatalf("%d allocations for %d buffers, want one each", allocs, count)
			}
			if how == "Close" {
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				if freed := p.Trim(); freed != count*size {
					t.Fatalf("Trim freed %d bytes, want %d", freed, count*size)
				}
				if st := p.Stats(); st.BytesHeld != 0 {
					t.Fatalf("after Trim the pool holds %d bytes", st.BytesHeld)
				}
				defer p.Close()
			}
			b.mu.Lock()
			maxSeen, timedOut := b.maxSeen, b.timedOut
			b.mu.Unlock()
			if timedOut || maxSeen < freeWorkers {
				t.Errorf("at most %d frees ran at once, want %d side by side", maxSeen, freeWorkers)
			}
			if maxSeen > freeWorkers {
				t.Errorf("%d frees ran at once, more than the bound of %d", maxSeen, freeWorkers)
			}
			if live, _, allocs, frees := b.stats(); live != 0 || frees != allocs {
				t.Errorf("after %s: %d bytes still allocated, %d frees of %d allocations", how, live, frees, allocs)
			}
		})
	}
}
