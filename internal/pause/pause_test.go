package pause

import (
	"testing"
	"time"
)

// TestForWaitsAtLeast checks the promise every caller relies on: the wait
// is never shorter than asked, also when signals interrupt it (the runtime
// preempts goroutines with signals; -race runs make many), and a wait of
// zero or less returns.
func TestForWaitsAtLeast(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 0, time.Microsecond, 200 * time.Microsecond, 3 * time.Millisecond} {
		for range 20 {
			t0 := time.Now()
			For(d)
			if got := time.Since(t0); got < d {
				t.Fatalf("For(%v) returned after %v", d, got)
			}
		}
	}
	t0 := time.Now()
	until := t0.Add(2 * time.Millisecond)
	Until(until)
	if time.Now().Before(until) {
		t.Fatalf("Until returned %v early", time.Until(until))
	}
	Until(t0.Add(-time.Hour)) // in the past: returns
}

// BenchmarkFor reports what a pause of 200 µs takes, beside time.Sleep's,
// with the process otherwise idle (wait-µs/op).
func BenchmarkFor(b *testing.B) {
	for _, bc := range []struct {
		name string
		f    func(time.Duration)
	}{{"pause", For}, {"time.Sleep", time.Sleep}} {
		b.Run(bc.name, func(b *testing.B) {
			t0 := time.Now()
			for b.Loop() {
				bc.f(200 * time.Microsecond)
			}
			b.ReportMetric(float64(time.Since(t0).Microseconds())/float64(b.N), "wait-µs/op")
		})
	}
}
