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
