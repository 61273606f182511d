//go:build linux

package transfer

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDirectGateSearch drives directGate with a disk whose rate depends on the reads at once (a
// fake clock advances by each read's bytes over that rate) and checks the count it settles on: the
// fastest that each doubling reached gateGain faster, never more than the readers.
func TestDirectGateSearch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		readers int
		rate    map[int]float64 // GB/s at each count; missing: as the count below
		want    int
	}{
		{"fewer-is-faster", 15, map[int]float64{2: 2.4, 4: 2.0, 8: 1.8, 15: 1.5}, 2},
		{"flat", 15, map[int]float64{2: 2.0, 4: 2.1, 8: 2.1, 15: 2.1}, 2},
		{"four", 15, map[int]float64{2: 1.0, 4: 1.6, 8: 1.7, 15: 1.2}, 4},
		{"all", 15, map[int]float64{2: 0.5, 4: 1.0, 8: 1.6, 15: 2.0}, 15},
		{"capped-at-readers", 6, map[int]float64{2: 1.0, 4: 1.5, 6: 2.0}, 6},
		{"one-reader", 1, map[int]float64{1: 1.0}, 1},
		{"two-readers", 2, map[int]float64{2: 1.0}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := time.Unix(0, 0)
			g := newDirectGate(tc.readers, true, func() time.Time { return clock })
			const piece = 2 << 20
			for range 40 * gateStep / piece {
				if err := g.acquire(context.Background(), 0); err != nil {
					t.Fatal(err)
				}
				clock = clock.Add(time.Duration(float64(piece) / (tc.rate[g.limit] * 1e9) * 1e9))
				g.release(piece)
			}
			if !g.settled || g.limit != tc.want {
				t.Fatalf("settled %v at %d reads at once, want %d", g.settled, g.limit, tc.want)
			}
			// Exactly limit reads start at once.
			for i := range tc.want {
				if err := g.acquire(context.Background(), int64(i)); err != nil {
					t.Fatal(err)
				}
			}
			if g.busy != tc.want || len(g.waiting) != 0 {
				t.Fatalf("%d reads started at once, want %d", g.busy, tc.want)
			}
		})
	}
}

// TestDirectGateBound runs readers goroutines through a searching gate on the real clock, racing,
// and checks that no more reads than the gate's count run at once, from the start (two) to the
// end, and that a lowered count is kept once the reads above it end.
func TestDirectGateBound(t *testing.T) {
	const readers = 8
	clock := atomic.Int64{}
	g := newDirectGate(readers, true, func() time.Time { return time.Unix(0, clock.Load()) })
	var in, peak atomic.Int32
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			for range 64 {
				if err := g.acquire(context.Background(), 0); err != nil {
					t.Error(err)
					return
				}
				g.mu.Lock()
				limit, busy := g.limit, g.busy
				g.mu.Unlock()
				if n := in.Add(1); int(n) > busy || busy > max(limit, 4) {
					t.Errorf("%d reads at once, %d started, the gate's count %d", n, busy, limit)
				} else if n > peak.Load() {
					peak.Store(n)
				}
				// Slower with a higher count: the search goes back to two.
				clock.Add(int64(limit) * 1000)
				in.Add(-1)
				g.release(gateStep / 8)
			}
		})
	}
	wg.Wait()
	if !g.settled || g.limit != 2 || g.busy != 0 || len(g.waiting) != 0 {
		t.Fatalf("settled %v at %d (%d started, %d waiting), want 2 and none", g.settled, g.limit, g.busy, len(g.waiting))
	}
}

// TestDirectGateCancel checks that a read waiting for the gate ends with its context, and that
// without the search every reader may read at once.
func TestDirectGateCancel(t *testing.T) {
	g := newDirectGate(4, true, time.Now)
	for range 2 {
		if err := g.acquire(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := g.acquire(ctx, 1<<30); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third read with two at once: %v, want the context's deadline", err)
	}
	all := newDirectGate(4, false, time.Now)
	for i := range 4 {
		if err := all.acquire(context.Background(), int64(i)); err != nil {
			t.Fatalf("read %d of 4 without the search: %v", i+1, err)
		}
	}
}

// TestDirectGateOrder checks that waiting reads start lowest offset first, whatever order they
// came in, and that a cancelled waiter leaves its turn to the next.
func TestDirectGateOrder(t *testing.T) {
	g := newDirectGate(8, true, time.Now) // two at once
	for i := range 2 {
		if err := g.acquire(context.Background(), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	started := make(chan int64, 4)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, off := range []int64{30, 10, 40, 20} {
		wg.Go(func() {
			c := context.Background()
			if off == 40 {
				c = ctx
			}
			if err := g.acquire(c, off); err == nil {
				started <- off
			}
		})
		for { // one waiter at a time, so that the test knows the order they came in
			g.mu.Lock()
			in := slices.ContainsFunc(g.waiting, func(w gateWaiter) bool { return w.off == off })
			g.mu.Unlock()
			if in {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	for _, want := range []int64{10, 20, 30} {
		g.release(0)
		if got := <-started; got != want {
			t.Fatalf("read at %d started, want %d", got, want)
		}
	}
	wg.Wait()
	if g.busy != 2 || len(g.waiting) != 0 {
		t.Fatalf("%d started, %d waiting; want 2 and none", g.busy, len(g.waiting))
	}
}
