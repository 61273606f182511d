package cudahost

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestLockGate checks the gate's promise: gated calls never overlap, and
// each starts at least the pause (or a quarter of the previous call's
// time) after the previous one ended; a negative pause lets calls overlap.
func TestLockGate(t *testing.T) {
	const pause = 2 * time.Millisecond
	g := &lockGate{pause: pause}
	var mu sync.Mutex
	type span struct{ start, end time.Time }
	var spans []span
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			g.do(func() {
				s := span{start: time.Now()}
				time.Sleep(time.Duration(i%3) * time.Millisecond * 4)
				s.end = time.Now()
				mu.Lock()
				spans = append(spans, s)
				mu.Unlock()
			})
		})
	}
	wg.Wait()
	slices.SortFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
	for i := 1; i < len(spans); i++ {
		prev := spans[i-1]
		want := prev.end.Add(max(pause, prev.end.Sub(prev.start)/4))
		if spans[i].start.Before(want) {
			t.Fatalf("call %d started %v after call %d ended, want at least %v", i, spans[i].start.Sub(prev.end), i-1, want.Sub(prev.end))
		}
	}

	off := &lockGate{pause: -1}
	inside := make(chan struct{})
	release := make(chan struct{})
	go off.do(func() { close(inside); <-release })
	<-inside
	done := make(chan struct{})
	go off.do(func() { close(done) })
	select {
	case <-done: // ran while the first is still inside
	case <-time.After(10 * time.Second):
		t.Fatal("with no pause a second call waited for the first")
	}
	close(release)
}

// BenchmarkLockGate reports the gap between the end of one gated call and
// the start of the next (gap-µs/op) with the default pause: what the lock
// gate leaves to other code, and what it costs a growth per piece.
func BenchmarkLockGate(b *testing.B) {
	g := &lockGate{pause: DefaultRegisterPause}
	var last time.Time
	var gaps time.Duration
	for b.Loop() {
		g.do(func() {
			if !last.IsZero() {
				gaps += time.Since(last)
			}
			last = time.Now()
		})
	}
	if b.N > 1 {
		b.ReportMetric(float64(gaps.Microseconds())/float64(b.N-1), "gap-µs/op")
	}
}
