package pinpool

import (
	"context"
	"testing"
	"time"
)

func TestDurationHistogram(t *testing.T) {
	var h durationHistogram
	for _, d := range []time.Duration{0, 10 * time.Microsecond, 11 * time.Microsecond, time.Millisecond, 20 * time.Second} {
		h.observe(d)
	}
	s := h.snapshot()
	want := []uint64{2, 1, 1, 0, 0, 0, 0, 1}
	for i, c := range s.Counts {
		if c != want[i] {
			t.Fatalf("counts %v, want %v", s.Counts, want)
		}
	}
	if s.Count() != 5 || s.Sum != 20*time.Second+time.Millisecond+21*time.Microsecond {
		t.Fatalf("count %d sum %v", s.Count(), s.Sum)
	}
}

// TestStatsHistograms: every growth is one observation of GrowTimes, and
// every Get that waited for room one of BudgetWaitTimes, with its wait.
func TestStatsHistograms(t *testing.T) {
	p, _ := newTestPool(t, Options{Exact: true, Budget: 8 << 20, GrowCount: 1})
	a := mustGet(t, p, 6<<20)
	done := make(chan error, 1)
	go func() {
		b, err := p.Get(context.Background(), 6<<20)
		if err == nil {
			b.Release()
		}
		done <- err
	}()
	waitFor(t, "the second Get to wait", func() bool { return p.Stats().BudgetWaits == 1 })
	time.Sleep(20 * time.Millisecond)
	a.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.GrowTimes.Count() != st.Grows || st.GrowTimes.Sum != st.GrowTime {
		t.Errorf("grow histogram %+v for %d grows taking %v", st.GrowTimes, st.Grows, st.GrowTime)
	}
	// The wait lasted at least the 20 ms before the release; how much
	// longer depends on the scheduler, so only the buckets below 10 ms
	// must be empty.
	if w := st.BudgetWaitTimes; w.Count() != 1 || w.Sum < 20*time.Millisecond || w.Counts[0]+w.Counts[1]+w.Counts[2]+w.Counts[3] != 0 {
		t.Errorf("wait histogram %+v, want one wait of 20 ms or more", w)
	}
}

// TestHistogramBoundsOwned: writing into a snapshot's Bounds changes
// neither DurationBounds, nor the next snapshot, nor how the pool counts;
// writing into DurationBounds does not change how the pool counts either.
func TestHistogramBoundsOwned(t *testing.T) {
	want := append([]time.Duration(nil), DurationBounds...)
	defer copy(DurationBounds, want)
	var h durationHistogram
	s := h.snapshot()
	for i := range s.Bounds {
		s.Bounds[i] = -1
	}
	for i, b := range DurationBounds {
		if b != want[i] {
			t.Fatalf("DurationBounds[%d] = %v after writing a snapshot's Bounds, want %v", i, b, want[i])
		}
	}
	if b := h.snapshot().Bounds; b[0] != want[0] {
		t.Fatalf("the next snapshot's Bounds[0] = %v, want %v", b[0], want[0])
	}
	DurationBounds[0] = time.Hour
	h.observe(time.Millisecond)
	if s := h.snapshot(); s.Counts[2] != 1 || s.Bounds[0] != want[0] {
		t.Fatalf("after writing DurationBounds: counts %v bounds %v", s.Counts, s.Bounds)
	}
}
