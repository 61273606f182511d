package transfer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestCoopSizes round-trips small transfers through the cooperative mode,
// at sizes around its chunks and stripes, with several lane counts, with
// one chunk per staging buffer and with four, and checks every byte, the
// chunks counted, and that the staging is all back.
func TestCoopSizes(t *testing.T) {
	packed := defaultTuning()
	packed.coopChunk = testChunk / 4
	for _, lanes := range []int{2, 3, 8} {
		for _, tu := range []tuning{defaultTuning(), packed} {
			coopSizes(t, lanes, tu)
		}
	}
}

func coopSizes(t *testing.T, lanes int, tu tuning) {
	e := newEnvTuned(t, Options{ChunkSize: testChunk, WindowBytes: 64 * testChunk, Lanes: lanes, DirectBelow: -1}, tu)
	e.d.latency.Store(int64(10 * time.Microsecond))
	chunk := min(testChunk, tu.coopChunk)
	for _, n := range []int{1, 63, 4095, 4097, tu.minStripe - 1, tu.minStripe + 1, chunk - 1, chunk, chunk + 1, testChunk - 1, testChunk, testChunk + 1, 7*testChunk + 4097, 32 * testChunk} {
		t.Run(fmt.Sprintf("lanes=%d/chunk=%d/n=%d", lanes, chunk, n), func(t *testing.T) {
			if p := planStaging(n, HostToDevice, 1, false, e.c.opt, tu); p.mode != cooperative {
				t.Fatalf("plan %+v, want cooperative", p)
			}
			src := randomBytes(n, uint64(n))
			dev := e.d.alloc(n)
			before := e.c.Stats().Chunks
			if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
				t.Fatal(err)
			}
			if got, want := e.c.Stats().Chunks-before, uint64((n+chunk-1)/chunk); got != want {
				t.Errorf("%d chunks counted, want %d", got, want)
			}
			if got, want := e.d.maxAsyncLen.Load(), int64(chunk); got > want {
				t.Errorf("an asynchronous copy of %d bytes, chunks are %d", got, want)
			}
			sameBytes(t, "device", e.devBytes(dev, n), src)
			back := make([]byte, n)
			if err := e.c.FromDevice(context.Background(), back, dev); err != nil {
				t.Fatal(err)
			}
			sameBytes(t, "round trip", back, src)
			if n := settledStaging(e.c); n != 0 {
				t.Errorf("%d bytes of staging held after the transfers", n)
			}
		})
	}
}

// TestCoopFallsBack checks, both ways, that a small transfer whose staging
// the window cannot give at once (the window held by another transfer)
// runs by its plan's chunked fallback instead, and still copies every
// byte, and that one larger than its share of the window runs chunked by
// its plan. The cooperative chunks are a quarter of a staging buffer, so
// the chunks counted tell the modes apart.
func TestCoopFallsBack(t *testing.T) {
	packed := defaultTuning()
	packed.coopChunk = testChunk / 4
	ctx := context.Background()
	for _, dir := range []Direction{HostToDevice, DeviceToHost} {
		for _, tc := range []struct {
			n    int
			busy bool
		}{{2 * testChunk, true}, {5 * testChunk, false}} {
			t.Run(fmt.Sprintf("%v/n=%d", dir, tc.n), func(t *testing.T) {
				e := newEnvTuned(t, Options{ChunkSize: testChunk, WindowBytes: 4 * testChunk, Lanes: 4, DirectBelow: -1}, packed)
				p := planStaging(tc.n, dir, 1, false, e.c.opt, e.c.tune)
				if want := map[bool]mode{true: cooperative, false: chunked}[tc.busy]; p.mode != want {
					t.Fatalf("plan %v, want %v", p.mode, want)
				}
				want := p.chunks // chunked: whole staging buffers
				if tc.busy {
					f := p.fallback()
					if f.mode != chunked || f.chunks == p.chunks {
						t.Fatalf("fallback %+v of %+v: want chunked, in other chunks", f, p)
					}
					want = f.chunks
					// 3 of the 4 slots: the 2 buffers cannot be had at once.
					for range 3 {
						if !e.c.wins[dir].tryAcquire() {
							t.Fatal("window busy")
						}
					}
				}
				dev, src := e.devHolding(tc.n, 7)
				host := src
				if dir == HostToDevice {
					dev = e.d.alloc(tc.n)
				} else {
					host = make([]byte, tc.n)
				}
				before := e.c.Stats().Chunks
				done := make(chan error, 1)
				go func() {
					if dir == HostToDevice {
						done <- e.c.ToDevice(ctx, dev, host)
					} else {
						done <- e.c.FromDevice(ctx, host, dev)
					}
				}()
				if tc.busy {
					time.Sleep(10 * time.Millisecond) // let it find the window short
					for range 3 {
						e.c.wins[dir].release()
					}
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if got := e.c.Stats().Chunks - before; got != uint64(want) {
					t.Errorf("%d chunks, want %d from the chunked mode", got, want)
				}
				if dir == HostToDevice {
					host = e.devBytes(dev, tc.n)
				}
				sameBytes(t, dir.String(), host, src)
				if n := settledStaging(e.c); n != 0 {
					t.Errorf("%d bytes of staging held after the transfer", n)
				}
			})
		}
	}
}

// TestCoopFailure injects a device failure into the second chunk of a
// cooperative transfer, when it is queued and when it runs, both ways: the
// copy returns a typed error, nothing stays in flight, the pool gets the
// staging back (retired when the copy failed while running), and the
// copier works afterwards. It fails a transfer that finds the lanes asleep
// and one that finds them awake, which device to host issues its copies
// before it offers itself to the lanes (plan.backToBack).
func TestCoopFailure(t *testing.T) {
	const n = 5*testChunk + 3
	for _, when := range []string{"enqueue", "exec"} {
		for _, dir := range []Direction{HostToDevice, DeviceToHost} {
			for _, awake := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%v/awake=%v", when, dir, awake), func(t *testing.T) {
					e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 16 * testChunk, Lanes: 4, DirectBelow: -1, LaneSpin: time.Second})
					e.d.latency.Store(int64(50 * time.Microsecond))
					if awake {
						// Two transfers first: the gap before the second
						// one keeps the lanes awake for the third.
						dev, src := e.devHolding(n, 4)
						for range 2 {
							if err := e.c.FromDevice(context.Background(), src, dev); err != nil {
								t.Fatal(err)
							}
							if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
								t.Fatal(err)
							}
						}
						if e.c.lanes[dir].asleep() {
							t.Fatal("lanes asleep right after two transfers")
						}
						if p := planStaging(n, dir, 1, false, e.c.opt, e.c.tune); p.mode != cooperative || p.backToBack != (dir == DeviceToHost) {
							t.Fatalf("plan %+v", p)
						}
					}
					e.injectFailure(when, 2)
					e.failThenRecover(dir, n, when, nil)
				})
			}
		}
	}
}

// TestCoopCancel cancels cooperative transfers at random points: each one
// either completes with every byte or returns an error wrapping the
// context's, with nothing left in flight and all staging back.
func TestCoopCancel(t *testing.T) {
	e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 16 * testChunk, Lanes: 4, DirectBelow: -1})
	e.d.latency.Store(int64(30 * time.Microsecond))
	const n = 6*testChunk + 11
	src := randomBytes(n, 13)
	dev := e.d.alloc(n)
	var cancelled int
	for i := range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%50)*time.Microsecond)
		var err error
		back := make([]byte, n)
		if i%2 == 0 {
			err = e.c.ToDevice(ctx, dev, src)
		} else {
			err = e.c.FromDevice(ctx, back, dev)
		}
		cancel()
		switch {
		case err == nil:
			if i%2 == 1 {
				sameBytes(t, "round trip", back, src)
			}
		case errors.Is(err, context.DeadlineExceeded):
			cancelled++
		default:
			t.Fatalf("iteration %d: %v", i, err)
		}
		if in := e.d.inflight.Load(); in != 0 {
			t.Fatalf("iteration %d: %d bytes in flight after return", i, in)
		}
		if i%2 == 0 && err != nil { // put the device bytes back for the reads
			if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := settledStaging(e.c); n != 0 {
		t.Errorf("%d bytes of staging held", n)
	}
	t.Logf("%d of 200 cancelled", cancelled)
}
