package cudahost

import (
	"context"
	"fmt"
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

// TestLockGateFit checks the sizes of registration calls: a whole piece
// before any call is measured or when it fits the hold at the last call's
// rate, else the piece shared evenly among calls that each fit it (whole
// huge pages), never less than one unit nor more than what is left; a
// call that is not sized changes nothing.
func TestLockGateFit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name        string
		n           int           // bytes of the last sized call (0: none)
		d           time.Duration // its time
		left, align int
		want        int
	}{
		{"none measured", 0, 0, 16 * mib, 2 * mib, 16 * mib},
		{"fast: whole piece", 16 * mib, lockHold / 2, 16 * mib, 2 * mib, 16 * mib},
		{"exactly the hold", 16 * mib, lockHold, 16 * mib, 2 * mib, 16 * mib},
		{"4x the hold: quarters", 16 * mib, 4 * lockHold, 16 * mib, 2 * mib, 4 * mib},
		{"1.5x the hold: halves", 16 * mib, lockHold * 3 / 2, 16 * mib, 2 * mib, 8 * mib},
		{"2.5x: thirds rounded up to huge pages", 16 * mib, lockHold * 5 / 2, 16 * mib, 2 * mib, 6 * mib},
		{"2.5x, small pages: thirds in pages", 16 * mib, lockHold * 5 / 2, 16 * mib, 4096, 5595136},
		{"a stalled call: one unit", 16 * mib, 100 * lockHold, 16 * mib, 2 * mib, 2 * mib},
		{"less left than a unit", 16 * mib, 100 * lockHold, mib, 2 * mib, mib},
		{"a small last call measured", 2 * mib, 2 * lockHold, 10 * mib, 2 * mib, 2 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g lockGate
			g.record(tc.n, tc.d)
			g.record(0, time.Hour) // a free: not sized
			if got := g.fit(tc.left, tc.align); got != tc.want {
				t.Errorf("fit(%d, %d) after %d bytes in %v = %d, want %d", tc.left, tc.align, tc.n, tc.d, got, tc.want)
			}
		})
	}
}

// TestLockGateRecordsSized checks that the gate times a sized call (and
// not the wait before it) for fit, and that a call that is not sized
// leaves the rate alone.
func TestLockGateRecordsSized(t *testing.T) {
	const mib = 1 << 20
	for _, pause := range []time.Duration{-1, 50 * time.Microsecond} {
		t.Run(fmt.Sprint(pause), func(t *testing.T) {
			g := &lockGate{pause: pause}
			g.sized(16*mib, func() { time.Sleep(4 * lockHold) })
			// At least 4x the hold: at most a quarter of 16 MiB a call.
			if got := g.fit(16*mib, 4096); got > 4*mib {
				t.Fatalf("after a call of 4x the hold, fit gives %d bytes, want at most %d", got, 4*mib)
			}
			before := g.fits.Load()
			g.do(func() { time.Sleep(time.Millisecond) })
			if g.fits.Load() != before {
				t.Fatal("a call that is not sized changed the rate")
			}
		})
	}
}

// TestPipelineFitsCalls checks that a pipeline registers each piece in
// calls of the sizes fit gives, that the parts tile the memory with
// progress rising to the whole, and that a call refused inside a piece
// undoes the calls of that piece (and every other) that succeeded.
func TestPipelineFitsCalls(t *testing.T) {
	const mib = 1 << 20
	for _, failAt := range []int{-1, 16*mib + 8*mib} {
		t.Run(fmt.Sprintf("failAt=%d", failAt), func(t *testing.T) {
			mem := make([]byte, 64*mib)
			f := &fakeFaults{failAt: -1}
			r := &fakeRegistrar{t: t, mem: mem, faults: f, failAt: failAt}
			pl := plan(len(mem), 16*mib, 1, 4, 2, 2*mib)
			var asked []int
			var mu sync.Mutex
			pl.fit = func(left int) int {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, left)
				return 4 * mib
			}
			var seen []int
			g, err := pl.run(context.Background(), f, mem, r.register, func(n int) { seen = append(seen, n) })
			if failAt >= 0 {
				if err == nil || len(r.live) != 0 {
					t.Fatalf("with a refused call: %v, %d parts left registered", err, len(r.live))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			off := 0
			for _, p := range g.parts {
				rp := p.(*regPart)
				if rp.off != off || rp.len != 4*mib {
					t.Fatalf("part at %d of %d bytes; want one at %d of %d", rp.off, rp.len, off, 4*mib)
				}
				off += rp.len
			}
			if off != len(mem) || r.calls != 16 || len(asked) != 16 {
				t.Fatalf("parts cover %d of %d bytes in %d calls (fit asked %d times), want 16", off, len(mem), r.calls, len(asked))
			}
			if len(seen) == 0 || seen[len(seen)-1] != len(mem) {
				t.Fatalf("progress %v: want rising to %d", seen, len(mem))
			}
			if err := freeParts(g.parts, 3); err != nil || len(r.live) != 0 {
				t.Fatalf("free: %v, %d parts left", err, len(r.live))
			}
		})
	}
}

// FuzzLockGateFit checks fit's size math for any last call and any piece:
// the size is at least one byte and at most what is left; all of it when
// no call was measured or it fits the hold; else a multiple of align (or
// what is left), no smaller than one align, in no more calls than the
// hold needs and none a whole align over it.
func FuzzLockGateFit(f *testing.F) {
	f.Add(16<<20, int64(lockHold*4), 16<<20, 2<<20)
	f.Add(16<<20, int64(lockHold/2), 16<<20, 4096)
	f.Add(1, int64(1), 1, 4096)
	f.Add(0, int64(0), 5<<20, 2<<20)
	f.Add(64<<30, int64(time.Hour), 64<<30, 2<<20)
	f.Add(16<<20, int64(2999910), 16<<20+2, 6) // found by the fuzzer: four calls fit, five were made
	f.Fuzz(func(t *testing.T, n int, d int64, left, alignShift int) {
		if n < 0 || n > 64<<30 || d < 0 || left <= 0 || left > 64<<30 {
			t.Skip()
		}
		align := 4096 << (uint(alignShift) % 10) // 4 KiB to 2 MiB
		var g lockGate
		g.record(n, time.Duration(d))
		got := g.fit(left, align)
		if got < 1 || got > left {
			t.Fatalf("fit(%d, %d) after %d bytes in %d ns = %d: not in [1, %d]", left, align, n, d, got, left)
		}
		fits := g.fits.Load()
		if fits <= 0 || fits >= int64(left) {
			if got != left {
				t.Fatalf("fit(%d, %d) = %d with %d bytes fitting the hold: want all of it", left, align, got, fits)
			}
			return
		}
		if got != left && got%align != 0 {
			t.Fatalf("fit(%d, %d) = %d: not a multiple of the align", left, align, got)
		}
		if got < min(align, left) {
			t.Fatalf("fit(%d, %d) = %d: less than one align", left, align, got)
		}
		// No more calls than the hold needs, and none over it by a whole align or more (but the
		// one align that is the least call).
		if calls, need := (left+got-1)/got, (int64(left)+fits-1)/fits; int64(calls) > need {
			t.Fatalf("fit(%d, %d) = %d: %d calls where %d fit the hold (%d bytes a call)", left, align, got, calls, need, fits)
		}
		if got > align && int64(got) >= fits+int64(align) {
			t.Fatalf("fit(%d, %d) = %d: a whole align over the %d bytes that fit the hold", left, align, got, fits)
		}
	})
}

// TestPipelineFitOutOfRange checks that a fit giving no bytes, a negative
// count or more than is left still registers every byte once, in calls
// of at least one byte and at most the piece.
func TestPipelineFitOutOfRange(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name  string
		fit   func(left int) int
		calls int
	}{
		{"zero", func(int) int { return 0 }, 0},      // one byte a call: not counted
		{"negative", func(int) int { return -5 }, 0}, // the same
		{"more than left", func(left int) int { return left + 7 }, 4},
		{"max int", func(int) int { return int(^uint(0) >> 1) }, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := 64 * mib
			if tc.calls == 0 {
				size = 8192 // one byte a call: keep it small
			}
			mem := make([]byte, size)
			f := &fakeFaults{failAt: -1}
			r := &fakeRegistrar{t: t, mem: mem, faults: f, failAt: -1}
			pl := plan(len(mem), 16*mib, 1, 2, 1, 4096)
			pl.fit = tc.fit
			g, err := pl.run(context.Background(), f, mem, r.register, nil)
			if err != nil {
				t.Fatal(err)
			}
			off := 0
			for _, p := range g.parts {
				rp := p.(*regPart)
				if rp.off != off || rp.len < 1 || rp.len > 16*mib {
					t.Fatalf("part at %d of %d bytes; want one at %d of 1 to %d", rp.off, rp.len, off, 16*mib)
				}
				off += rp.len
			}
			if off != size || tc.calls > 0 && r.calls != tc.calls {
				t.Fatalf("parts cover %d of %d bytes in %d calls, want %d", off, size, r.calls, tc.calls)
			}
			freeParts(g.parts, 2)
		})
	}
}
