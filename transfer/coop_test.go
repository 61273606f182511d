package transfer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestCoopSizes round-trips small transfers through the cooperative path,
// at sizes around its pieces and slices, with several lane counts, and
// checks every byte, the pieces counted as chunks, and that the staging
// is all back.
func TestCoopSizes(t *testing.T) {
	for _, workers := range []int{2, 3, 8} {
		e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 64 * testChunk, Workers: workers, DirectBelow: -1})
		e.d.latency.Store(int64(10 * time.Microsecond))
		for _, n := range []int{1, 63, 4095, 4097, coopSlice - 1, coopSlice + 1, testChunk - 1, testChunk, testChunk + 1, 7*testChunk + 4097, 32 * testChunk} {
			t.Run(fmt.Sprintf("workers=%d/n=%d", workers, n), func(t *testing.T) {
				src := randomBytes(n, uint64(n))
				dev := e.d.alloc(n)
				before := e.c.Stats().Chunks
				if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
					t.Fatal(err)
				}
				if got, want := e.c.Stats().Chunks-before, uint64((n+testChunk-1)/testChunk); got != want {
					t.Errorf("%d pieces counted, want %d (one per chunk-sized piece)", got, want)
				}
				sameBytes(t, "device", e.devBytes(dev, n), src)
				back := make([]byte, n)
				if err := e.c.FromDevice(context.Background(), back, dev); err != nil {
					t.Fatal(err)
				}
				sameBytes(t, "round trip", back, src)
				if st := e.c.Stats(); st.StagingBytes != 0 {
					t.Errorf("%d bytes of staging held after the transfers", st.StagingBytes)
				}
			})
		}
	}
}

// TestCoopFallsBack checks that a small transfer whose pieces the window
// cannot give at once, and one larger than the cooperative limit, take the
// chunked path (one chunk per unitFor bytes) and still arrive.
func TestCoopFallsBack(t *testing.T) {
	e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 4 * testChunk, Workers: 4, DirectBelow: -1, coopMax: 8 * testChunk})
	for _, n := range []int{3 * testChunk, 9 * testChunk} { // 3 pieces > 4/2 slots; above coopMax
		src := randomBytes(n, 7)
		dev := e.d.alloc(n)
		before := e.c.Stats().Chunks
		if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
			t.Fatal(err)
		}
		unit := unitFor(n, testChunk, 4)
		if got, want := e.c.Stats().Chunks-before, uint64((n+unit-1)/unit); got != want {
			t.Errorf("%d bytes: %d chunks, want %d from the chunked path", n, got, want)
		}
		sameBytes(t, "device", e.devBytes(dev, n), src)
	}
}

// TestCoopFailure injects a device failure into the second piece of a
// cooperative transfer, when it is queued and when it runs, both ways: the
// copy returns a typed error, nothing stays in flight, the pool gets the
// staging back (retired when the copy failed while running), and the
// copier works afterwards.
func TestCoopFailure(t *testing.T) {
	for _, when := range []string{"enqueue", "exec"} {
		for _, dir := range []Direction{HostToDevice, DeviceToHost} {
			t.Run(when+"/"+dir.String(), func(t *testing.T) {
				e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 16 * testChunk, Workers: 4, DirectBelow: -1})
				e.d.latency.Store(int64(50 * time.Microsecond))
				e.injectFailure(when, 2)
				const n = 5*testChunk + 3
				dev := e.d.alloc(n)
				host := randomBytes(n, 3)
				var err error
				if dir == HostToDevice {
					err = e.c.ToDevice(context.Background(), dev, host)
				} else {
					err = e.c.FromDevice(context.Background(), host, dev)
				}
				if !errors.Is(err, ErrCopy) || !errors.Is(err, errInjected) {
					t.Fatalf("got %v", err)
				}
				if in := e.d.inflight.Load(); in != 0 {
					t.Fatalf("%d bytes in flight after the failed copy returned", in)
				}
				e.checkPool(when == "enqueue")
				e.d.failEnqueue, e.d.failExec = nil, nil
				if err := e.c.ToDevice(context.Background(), dev, host); err != nil {
					t.Fatalf("copy after the failure: %v", err)
				}
				sameBytes(t, "device", e.devBytes(dev, n), host)
			})
		}
	}
}

// TestCoopCancel cancels cooperative transfers at random points: each one
// either completes with every byte or returns an error wrapping the
// context's, with nothing left in flight and all staging back.
func TestCoopCancel(t *testing.T) {
	e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 16 * testChunk, Workers: 4, DirectBelow: -1})
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
	if st := e.c.Stats(); st.StagingBytes != 0 {
		t.Errorf("%d bytes of staging held", st.StagingBytes)
	}
	t.Logf("%d of 200 cancelled", cancelled)
}
