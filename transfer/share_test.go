package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestChunkedTails round-trips chunked transfers, where the lanes share the
// last chunks' copy-out (device to host), at sizes around a round of chunks and with 1, 2,
// 3 and 8 lanes, and checks every byte, the chunks counted, that the
// staging is all back, and that one lane copies out alone.
func TestChunkedTails(t *testing.T) {
	for _, lanes := range []int{1, 2, 3, 8} {
		e := newEnvTuned(t, Options{ChunkSize: testChunk, WindowBytes: 16 * testChunk, Lanes: lanes, DirectBelow: -1}, chunkedOnly())
		e.d.latency.Store(int64(20 * time.Microsecond))
		for _, n := range []int{1, 4095, testChunk - 1, testChunk + 1, lanes*testChunk - 1, lanes * testChunk, lanes*testChunk + 4097, 40*testChunk + 13} {
			t.Run(fmt.Sprintf("lanes=%d/n=%d", lanes, n), func(t *testing.T) {
				p := planStaging(n, DeviceToHost, 1, false, e.c.opt, chunkedOnly())
				src := randomBytes(n, uint64(n))
				dev := e.d.alloc(n)
				if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
					t.Fatal(err)
				}
				sameBytes(t, "device", e.devBytes(dev, n), src)
				before, helped := e.c.Stats().Chunks, e.c.stats.helped.Load()
				back := make([]byte, n)
				if err := e.c.FromDevice(context.Background(), back, dev); err != nil {
					t.Fatal(err)
				}
				sameBytes(t, "round trip", back, src)
				if got := e.c.Stats().Chunks - before; got != uint64(p.chunks) {
					t.Errorf("%d chunks counted, the plan has %d", got, p.chunks)
				}
				h := e.c.stats.helped.Load() - helped
				if p.lanes == 1 && h != 0 {
					t.Errorf("one lane, but %d stripes copied out by a helper", h)
				}
				if st := e.c.Stats(); st.StagingBytes != 0 {
					t.Errorf("%d bytes of staging held after the transfers", st.StagingBytes)
				}
			})
		}
	}
}

// TestChunkedTailsFail fails one asynchronous copy of a chunked transfer, at
// the start, in the middle and among the last chunks, when it is queued
// and when it runs: the transfer returns the copy's error, nothing stays in
// flight, the staging comes back, and the next transfer copies. Device to
// host, a failure among the last chunks stops lanes that are helping with
// other lanes' copy-outs.
func TestChunkedTailsFail(t *testing.T) {
	const n = 24*testChunk + 5
	for _, when := range []string{"enqueue", "exec"} {
		for _, nth := range []int64{1, 12, 22, 25} {
			for _, dir := range []Direction{HostToDevice, DeviceToHost} {
				t.Run(fmt.Sprintf("%s/copy=%d/%v", when, nth, dir), func(t *testing.T) {
					e := newEnvTuned(t, Options{ChunkSize: testChunk, WindowBytes: 8 * testChunk, Lanes: 4, DirectBelow: -1}, chunkedOnly())
					e.d.latency.Store(int64(20 * time.Microsecond))
					e.injectFailure(when, nth)
					e.failThenRecover(dir, n, when, nil)
				})
			}
		}
	}
}

// TestChunkedTailsCancel cancels device-to-host chunked transfers at
// points spread over their length, the last chunks' shared copy-out
// among them: each one either completes with every byte or returns the
// context's error, and none hangs.
func TestChunkedTailsCancel(t *testing.T) {
	e := newEnvTuned(t, Options{ChunkSize: testChunk, WindowBytes: 8 * testChunk, Lanes: 4, DirectBelow: -1}, chunkedOnly())
	e.d.latency.Store(int64(30 * time.Microsecond))
	const n = 20*testChunk + 11
	dev, src := e.devHolding(n, 13)
	// Deadlines from zero to twice an uncancelled transfer's time.
	t0 := time.Now()
	if err := e.c.FromDevice(context.Background(), make([]byte, n), dev); err != nil {
		t.Fatal(err)
	}
	step := 2 * time.Since(t0) / 100
	var cancelled, completed int
	for i := range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i)*step)
		back := make([]byte, n)
		err := e.c.FromDevice(ctx, back, dev)
		cancel()
		switch {
		case err == nil:
			sameBytes(t, "round trip", back, src)
			completed++
		case errors.Is(err, context.DeadlineExceeded):
			cancelled++
		default:
			t.Fatalf("transfer %d: %v", i, err)
		}
	}
	// How many land on each side depends on the machine's speed at the
	// time: the test asserts only what each transfer returned.
	t.Logf("%d transfers cancelled, %d completed", cancelled, completed)
}

// TestSharedCopyOutHelps checks that the lanes share the last chunks'
// copy-out: in a device-to-host transfer of two chunks on two lanes, the
// lane whose chunk lands first waits (testHookShare) until the other lane,
// done with its own chunk, has claimed a stripe of it, and every byte
// arrives. The device holds the copies until both lanes have joined, so
// the waits hold whatever the scheduling: the other lane comes, since the
// waiting lane's chunk is the only one not copied out.
func TestSharedCopyOutHelps(t *testing.T) {
	e := newEnvTuned(t, Options{ChunkSize: testChunk, WindowBytes: 16 * testChunk, Lanes: 2, DirectBelow: -1, LaneSpin: time.Second}, chunkedOnly())
	const n = 2 * testChunk
	dev, src := e.devHolding(n, 5)
	if p := planStaging(n, DeviceToHost, 1, false, e.c.opt, chunkedOnly()); p.mode != chunked || p.chunks != 2 || p.lanes != 2 {
		t.Fatalf("plan %+v: want two chunks on two lanes", p)
	}
	var once atomic.Bool
	testHookShare = func(s *outShare) {
		if once.CompareAndSwap(false, true) { // the first share only
			spinUntil(func() bool { return s.next.Load() > 0 }, -1)
		}
	}
	defer func() { testHookShare = nil }()
	for i := range 5 {
		once.Store(false)
		before, helped := e.c.stats.lanes.Load(), e.c.stats.helped.Load()
		hold := func() { spinUntil(func() bool { return e.c.stats.lanes.Load()-before >= 2 }, -1) }
		e.d.hold.Store(&hold)
		back := make([]byte, n)
		err := e.c.FromDevice(context.Background(), back, dev)
		e.d.hold.Store(nil)
		if err != nil {
			t.Fatal(err)
		}
		sameBytes(t, "round trip", back, src)
		if e.c.stats.helped.Load() == helped {
			t.Fatalf("transfer %d: no lane copied out a stripe of another lane's chunk", i)
		}
	}
}

// TestChunkedTailsConcurrent runs chunked transfers in both directions
// from six goroutines at once on one copier, so that transfers share the
// lanes and the window while their last chunks are shared: every
// byte arrives, and the staging all comes back.
func TestChunkedTailsConcurrent(t *testing.T) {
	e := newEnvTuned(t, Options{ChunkSize: testChunk, WindowBytes: 12 * testChunk, Lanes: 8, DirectBelow: -1}, chunkedOnly())
	e.d.latency.Store(int64(10 * time.Microsecond))
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 15 {
				n := 1 + r.IntN(20*testChunk)
				dev, src := e.devHolding(n, uint64(100*g+i))
				back := make([]byte, n)
				if err := e.c.FromDevice(context.Background(), back, dev); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(back, src) {
					t.Errorf("goroutine %d, transfer %d: device to host bytes differ", g, i)
					return
				}
				for j := range back {
					back[j] ^= 0x5a
				}
				if err := e.c.ToDevice(context.Background(), dev, back); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(e.devBytes(dev, n), back) {
					t.Errorf("goroutine %d, transfer %d: host to device bytes differ", g, i)
					return
				}
			}
		})
	}
	wg.Wait()
	if st := e.c.Stats(); st.StagingBytes != 0 || st.Failed != 0 {
		t.Errorf("after the transfers: %d bytes of staging held, %d failed", st.StagingBytes, st.Failed)
	}
}

// TestChunkedTailsCloseRace closes the copier while goroutines run chunked
// transfers both ways, some of them in their shared last
// chunks: Close waits for them, each either copies every byte or returns
// ErrClosed, and nothing is left running or held (the env's cleanup checks
// the goroutines, streams, events and staging).
func TestChunkedTailsCloseRace(t *testing.T) {
	for round := range 8 {
		e := newEnvTuned(t, Options{ChunkSize: testChunk, WindowBytes: 8 * testChunk, Lanes: 8, DirectBelow: -1}, chunkedOnly())
		e.d.latency.Store(int64(20 * time.Microsecond))
		e.closeDuringRoundTrips(4, 20*testChunk+7, uint64(10*round), time.Duration(round+1)*300*time.Microsecond)
		if st := e.c.Stats(); st.StagingBytes != 0 {
			t.Errorf("round %d: %d bytes of staging held after Close", round, st.StagingBytes)
		}
	}
}
