package transfer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

// handoffOptions make back-to-back downloads of handoffBytes cooperative
// with their lanes awake (a LaneSpin far longer than the gaps between
// them), so that they hand their staging off to the lanes (coop.go).
var handoffOptions = Options{ChunkSize: testChunk, WindowBytes: 64 * testChunk, Lanes: 8, LaneSpin: time.Second, DirectBelow: -1}

const handoffBytes = 3*testChunk + 4097

// newHandoffEnv is an environment whose downloads of handoffBytes hand off,
// the fake device's copies taking latency each.
func newHandoffEnv(t *testing.T, latency time.Duration) *env {
	t.Helper()
	e := newEnv(t, handoffOptions)
	e.d.latency.Store(int64(latency))
	if p := planStaging(handoffBytes, DeviceToHost, 1, false, e.c.opt, e.c.tune); p.mode != cooperative || !p.handoff {
		t.Fatalf("plan %+v: want a cooperative download, back to back, staging alone", p)
	}
	return e
}

// TestHandoff checks the promise of a handoff: when a back-to-back
// download returns, every byte is in place, although the lanes may still
// hold its staging; they give it back soon after, and Close waits for
// them. Whether a download hands off depends on the scheduling (a lane must
// join and still be at work when its caller is done), so the test runs
// the downloads twice: as they come, where it asserts only the promises,
// and forced (forceHandoff), where every download whose lanes were awake
// must hand off, on any number of processors.
func TestHandoff(t *testing.T) {
	for _, procs := range []int{0, 1} {
		for _, forced := range []bool{false, true} {
			t.Run(fmt.Sprintf("processors=%d/forced=%v", procs, forced), func(t *testing.T) {
				if procs > 0 {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				}
				handoffDownloads(t, forced)
			})
		}
	}
}

// forceHandoff makes every download that may hand off do so, until the
// test ends: its caller waits for a lane to join before it copies, the
// caller spins on its stripes without a limit, and the lanes wait for the
// caller to close the transfer before they count themselves out. Set it
// before the copier is made.
func forceHandoff(t *testing.T) {
	saved := endSpin
	endSpin = -1 // handOff spins until every stripe is copied out
	testHookHandoff = func(r *coopRun, caller bool) {
		if caller {
			spinUntil(func() bool { return r.owners.Load() > 1 }, -1) // a lane joined (it may be done already)
			return
		}
		spinUntil(func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.closed
		}, -1)
	}
	t.Cleanup(func() { endSpin, testHookHandoff = saved, nil })
}

// handoffDownloads runs 300 back-to-back downloads for TestHandoff; forced
// forces the handoff (forceHandoff) and requires it of every download but
// the first, whose lanes are asleep.
func handoffDownloads(t *testing.T, forced bool) {
	if forced {
		forceHandoff(t)
	}
	e := newHandoffEnv(t, 20*time.Microsecond)
	ctx := context.Background()
	dev, src := e.devHolding(handoffBytes, 41)
	back := make([]byte, handoffBytes)
	const downloads = 300
	for i := range downloads {
		clear(back)
		if err := e.c.FromDevice(ctx, back, dev); err != nil {
			t.Fatalf("download %d: %v", i, err)
		}
		sameBytes(t, fmt.Sprintf("download %d, as it returned", i), back, src)
	}
	handed := e.c.stats.handedOff.Load()
	t.Logf("%d of %d downloads handed off", handed, downloads)
	if forced && handed == 0 {
		t.Fatal("no download handed its staging off to a lane")
	}
	if n := settledStaging(e.c); n != 0 {
		t.Fatalf("%d bytes of staging held 10 s after the downloads", n)
	}
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	if st, ps := e.c.Stats(), e.pool.Stats(); st.StagingBytes != 0 || ps.BytesInUse != 0 {
		t.Fatalf("after Close: %d bytes of staging held, %d pool bytes in use", st.StagingBytes, ps.BytesInUse)
	}
}

// TestHandoffClose races Close with a stream of back-to-back downloads:
// each returns every byte or ErrClosed, and once Close returns the lanes
// hold no staging (Close waits for them, as they may finish a download
// after its caller).
func TestHandoffClose(t *testing.T) {
	for round := range 20 {
		e := newHandoffEnv(t, 10*time.Microsecond)
		dev, src := e.devHolding(handoffBytes, uint64(round))
		var wg sync.WaitGroup
		wg.Go(func() {
			back := make([]byte, handoffBytes)
			for i := 0; ; i++ {
				clear(back)
				err := e.c.FromDevice(context.Background(), back, dev)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("round %d, download %d: %v", round, i, err)
					return
				}
				sameBytes(t, fmt.Sprintf("round %d, download %d", round, i), back, src)
			}
		})
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		if err := e.c.Close(); err != nil {
			t.Fatal(err)
		}
		if st, ps := e.c.Stats(), e.pool.Stats(); st.StagingBytes != 0 || ps.BytesInUse != 0 {
			t.Fatalf("round %d, after Close: %d bytes of staging held, %d pool bytes in use", round, st.StagingBytes, ps.BytesInUse)
		}
		wg.Wait()
	}
}

// TestHandoffCancel cancels back-to-back downloads at every point, before
// and after their last stripe is copied out: each returns every byte or
// the context's error, a lane that finds the context done after the
// caller returned fails nothing, and the staging all comes back.
func TestHandoffCancel(t *testing.T) {
	e := newHandoffEnv(t, 10*time.Microsecond)
	dev, src := e.devHolding(handoffBytes, 43)
	back := make([]byte, handoffBytes)
	// The deadlines run from 0 to twice a download's typical time.
	t0 := time.Now()
	for range 20 {
		if err := e.c.FromDevice(context.Background(), back, dev); err != nil {
			t.Fatal(err)
		}
	}
	typical := time.Since(t0) / 20
	var cancelled int
	for i := range 300 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%60)*stepOf(typical))
		clear(back)
		err := e.c.FromDevice(ctx, back, dev)
		cancel()
		switch {
		case err == nil:
			sameBytes(t, fmt.Sprintf("download %d", i), back, src)
		case errors.Is(err, context.DeadlineExceeded):
			cancelled++
		default:
			t.Fatalf("download %d: %v", i, err)
		}
		if in := e.d.inflight.Load(); in != 0 {
			t.Fatalf("download %d: %d bytes in flight after return", i, in)
		}
	}
	t.Logf("%d of 300 cancelled, %d handed off", cancelled, e.c.stats.handedOff.Load())
	if n := settledStaging(e.c); n != 0 {
		t.Fatalf("%d bytes of staging held 10 s after the downloads", n)
	}
}

// stepOf is a 30th of d (at least a microsecond).
func stepOf(d time.Duration) time.Duration { return max(d/30, time.Microsecond) }
