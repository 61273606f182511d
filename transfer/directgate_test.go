//go:build linux

package transfer

import (
	"context"
	"errors"
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
				if err := g.acquire(context.Background()); err != nil {
					t.Fatal(err)
				}
				clock = clock.Add(time.Duration(float64(piece) / (tc.rate[g.limit] * 1e9) * 1e9))
				g.release(piece)
			}
			if !g.settled || g.limit != tc.want {
				t.Fatalf("settled %v at %d reads at once, want %d", g.settled, g.limit, tc.want)
			}
			// The units held back are the readers less the limit: exactly limit reads start at once.
			held := 0
			for g.sem.TryAcquire(1) {
				held++
			}
			if held != tc.want {
				t.Fatalf("%d reads could start at once, want %d", held, tc.want)
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
				if err := g.acquire(context.Background()); err != nil {
					t.Error(err)
					return
				}
				g.mu.Lock()
				limit, owed := g.limit, g.owed
				g.mu.Unlock()
				if n := in.Add(1); int(n) > limit+owed {
					t.Errorf("%d reads at once, the gate's count %d (%d above it still ending)", n, limit, owed)
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
	if !g.settled || g.limit != 2 || g.owed != 0 {
		t.Fatalf("settled %v at %d (owed %d), want 2", g.settled, g.limit, g.owed)
	}
}

// TestDirectGateCancel checks that a read waiting for the gate ends with its context, and that
// without the search every reader may read at once.
func TestDirectGateCancel(t *testing.T) {
	g := newDirectGate(4, true, time.Now)
	for range 2 {
		if err := g.acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := g.acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third read with two at once: %v, want the context's deadline", err)
	}
	all := newDirectGate(4, false, time.Now)
	for i := range 4 {
		if !all.sem.TryAcquire(1) {
			t.Fatalf("read %d of 4 refused without the search", i+1)
		}
	}
}
