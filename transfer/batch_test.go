package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cuda"
)

// slowBatchEnv is a copier over a fake device whose copies take long
// enough that its stream stays busy, so that chunked transfers park
// chunks and issue them in batches (batch.go), in both directions (the
// default tuning batches host to device only) and from the first chunk.
func slowBatchEnv(t *testing.T, lanes int, noBatch bool) *env {
	t.Helper()
	d := newFakeDevice()
	d.noBatch = noBatch
	tu := chunkedOnly()
	tu.batchMax, tu.batchFrom = [2]int{2, 2}, 0
	e := newEnvOn(t, d, d, Options{ChunkSize: testChunk, WindowBytes: 16 * testChunk, Lanes: lanes, DirectBelow: -1}, tu)
	d.latency.Store(int64(300 * time.Microsecond))
	return e
}

// TestBatchedChunks moves chunked transfers both ways over a slow stream:
// chunks are parked and issued two to a batch, every byte arrives, every
// chunk is counted once, and the staging comes back. Without batch copies
// in the driver nothing is parked.
func TestBatchedChunks(t *testing.T) {
	for _, noBatch := range []bool{false, true} {
		for _, lanes := range []int{2, 8} {
			t.Run(fmt.Sprintf("noBatch=%v/lanes=%d", noBatch, lanes), func(t *testing.T) {
				e := slowBatchEnv(t, lanes, noBatch)
				const n = 40*testChunk + 13
				src := randomBytes(n, 5)
				dev := e.d.alloc(n)
				p := planStaging(n, HostToDevice, 1, false, e.c.opt, chunkedOnly())
				if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
					t.Fatal(err)
				}
				sameBytes(t, "device", e.devBytes(dev, n), src)
				back := make([]byte, n)
				if err := e.c.FromDevice(context.Background(), back, dev); err != nil {
					t.Fatal(err)
				}
				sameBytes(t, "round trip", back, src)
				if got := e.c.Stats().Chunks; got != uint64(2*p.chunks) {
					t.Errorf("%d chunks counted, the plans have %d", got, 2*p.chunks)
				}
				parked, batched, calls := e.c.stats.parked.Load(), e.c.stats.batched.Load(), e.d.batches.Load()
				t.Logf("parked %d, batched %d chunks in %d batches", parked, batched, calls)
				if noBatch {
					if parked != 0 || batched != 0 || calls != 0 {
						t.Errorf("no batch copies in the driver, but %d chunks parked and %d batched in %d batches", parked, batched, calls)
					}
				} else if parked == 0 || batched == 0 || calls == 0 {
					t.Errorf("a busy stream, but %d chunks parked and %d batched in %d batches", parked, batched, calls)
				}
				if batched > 2*uint64(calls) {
					t.Errorf("%d chunks in %d batches: more than batchMax (2) to a batch", batched, calls)
				}
				if n := settledStaging(e.c); n != 0 {
					t.Errorf("%d bytes of staging held after the transfers", n)
				}
			})
		}
	}
}

// TestBatchedChunksFail fails one copy of a chunked transfer over a slow
// stream, where chunks go out in batches, when it is queued (a batch
// fails halfway through being queued) and when it runs (the whole batch
// reports the failure): the transfer returns the copy's error with
// nothing in flight, the staging comes back, and the next transfer copies.
func TestBatchedChunksFail(t *testing.T) {
	const n = 24*testChunk + 5
	for _, when := range []string{"enqueue", "exec"} {
		for _, nth := range []int64{2, 9, 12, 17, 24} {
			for _, dir := range []Direction{HostToDevice, DeviceToHost} {
				t.Run(fmt.Sprintf("%s/copy=%d/%v", when, nth, dir), func(t *testing.T) {
					e := slowBatchEnv(t, 4, false)
					e.injectFailure(when, nth)
					e.failThenRecover(dir, n, when, nil)
				})
			}
		}
	}
}

// TestBatchedChunksFailInBatch makes sure that TestBatchedChunksFail's
// kind of failure lands inside a batch at least once (a copy refused after
// others of its batch were queued), and that the transfer then behaves as
// for any other failure.
func TestBatchedChunksFailInBatch(t *testing.T) {
	const n = 24*testChunk + 5
	for nth := int64(3); nth < 24; nth++ {
		e := slowBatchEnv(t, 4, false)
		e.injectFailure("enqueue", nth)
		e.failThenRecover(HostToDevice, n, "enqueue", nil)
		if e.d.batchFails.Load() > 0 {
			return
		}
	}
	t.Fatal("no injected failure landed inside a batch")
}

// TestIssueBatchUnsure fails a batch halfway through being queued after
// the copy queued before the failure failed too, so that the stream cannot
// be synchronized: every ticket of the batch gets the error and is marked
// unsure (its buffer must be retired, not reused), and no event is left.
func TestIssueBatchUnsure(t *testing.T) {
	e := newEnv(t, Options{ChunkSize: testChunk, DirectBelow: -1})
	var tickets []*ticket
	for i := range 3 {
		b, err := e.pool.Get(context.Background(), testChunk)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		tickets = append(tickets, &ticket{dir: HostToDevice, dev: e.d.alloc(testChunk), host: b.Bytes()[:testChunk], off: i * testChunk})
	}
	e.injectFailure("exec", 1)
	enq := e.injectFailure("enqueue", 2)
	e.c.issuing[HostToDevice].lock()
	q := &e.c.queues[HostToDevice]
	q.parked = append(q.parked, tickets[0], tickets[1])
	e.c.issueParked(HostToDevice, tickets[2])
	e.c.issuing[HostToDevice].unlock()
	if enq.Load() < 2 {
		t.Fatalf("the batch queued %d copies", enq.Load())
	}
	for i, x := range tickets {
		if !x.issued.Load() || x.err == nil || !x.unsure || x.ev != nil {
			t.Errorf("ticket %d: issued %v, err %v, unsure %v, event %v", i, x.issued.Load(), x.err, x.unsure, x.ev != nil)
		}
		if err := e.c.wait(x); err == nil || err != x.err {
			t.Errorf("ticket %d: wait returned %v, not the issue's error %v", i, err, x.err)
		}
	}
	if len(q.parked) != 0 || len(q.recent) != 0 {
		t.Errorf("%d tickets parked and %d batches recent after a failed batch", len(q.parked), len(q.recent))
	}
	e.d.failEnqueue, e.d.failExec = nil, nil
}

// TestBatchedChunksCancel cancels chunked transfers over a slow stream at
// deadlines from the first chunk to past the end, while chunks are parked:
// each returns every byte or the context's error, and the next copies.
func TestBatchedChunksCancel(t *testing.T) {
	const n = 30*testChunk + 1
	for _, dir := range []Direction{HostToDevice, DeviceToHost} {
		e := slowBatchEnv(t, 8, false)
		dev, src := e.devHolding(n, 7)
		for _, after := range []time.Duration{0, 200 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 50 * time.Millisecond} {
			ctx, cancel := context.WithTimeout(context.Background(), after)
			buf := make([]byte, n)
			var err error
			if dir == HostToDevice {
				err = e.c.ToDevice(ctx, dev, src)
			} else {
				err = e.c.FromDevice(ctx, buf, dev)
			}
			cancel()
			switch {
			case err == nil && dir == DeviceToHost && !bytes.Equal(buf, src):
				t.Fatalf("%v after %v: nil error, wrong bytes", dir, after)
			case err != nil && !errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("%v after %v: %v", dir, after, err)
			}
			if in := e.d.inflight.Load(); in != 0 {
				t.Fatalf("%v after %v: %d bytes in flight after the transfer returned", dir, after, in)
			}
			if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
				t.Fatal(err)
			}
		}
		back := make([]byte, n)
		if err := e.c.FromDevice(context.Background(), back, dev); err != nil {
			t.Fatal(err)
		}
		sameBytes(t, fmt.Sprintf("%v after the cancellations", dir), back, src)
	}
}

// TestBatchedChunksConcurrent runs chunked transfers both ways from six
// goroutines on one copier over a slow stream, so that one batch holds
// chunks of different transfers, then closes the copier while they run:
// each transfer returns every byte or ErrClosed, and nothing is left
// running or held (the env's cleanup checks events, streams and staging).
func TestBatchedChunksConcurrent(t *testing.T) {
	for round := range 3 {
		e := slowBatchEnv(t, 8, false)
		e.closeDuringRoundTrips(6, 12*testChunk+3, uint64(10*round), time.Duration(round+1)*5*time.Millisecond)
		if e.c.stats.batched.Load() == 0 {
			t.Errorf("round %d: no chunk issued in a batch", round)
		}
		if st := e.c.Stats(); st.StagingBytes != 0 {
			t.Errorf("round %d: %d bytes of staging held after Close", round, st.StagingBytes)
		}
	}
}

// TestBatchDefaults checks the default tuning's choices over a slow
// stream: host to device, the first round of chunks (one per lane) is
// issued as it comes and later chunks are parked; device to host nothing
// is parked.
func TestBatchDefaults(t *testing.T) {
	const lanes = 4
	d := newFakeDevice()
	e := newEnvOn(t, d, d, Options{ChunkSize: testChunk, WindowBytes: 16 * testChunk, Lanes: lanes, DirectBelow: -1}, chunkedOnly())
	d.latency.Store(int64(300 * time.Microsecond))
	for _, tc := range []struct {
		dir    Direction
		n      int
		parked bool
	}{
		{HostToDevice, lanes * testChunk, false},
		{DeviceToHost, 40 * testChunk, false},
		{HostToDevice, 40 * testChunk, true},
	} {
		dev, src := e.devHolding(tc.n, 9)
		before := e.c.stats.parked.Load()
		var err error
		if tc.dir == HostToDevice {
			err = e.c.ToDevice(context.Background(), dev, src)
		} else {
			err = e.c.FromDevice(context.Background(), make([]byte, tc.n), dev)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := e.c.stats.parked.Load() - before; (got > 0) != tc.parked {
			t.Errorf("%v of %d bytes: %d chunks parked", tc.dir, tc.n, got)
		}
	}
}

// TestBatchRefused gives the copier a driver that has batch copies and
// refuses them, with CUDA_ERROR_NOT_SUPPORTED or INVALID_VALUE, after
// queueing none or one copy of the batch: chunked transfers both ways still
// move every byte, the refusal is counted once, and no later chunk is
// parked or batched. A batch that fails for another reason is the
// transfer's error, and the copier goes on batching.
func TestBatchRefused(t *testing.T) {
	const n = 40*testChunk + 13
	for _, tc := range []struct {
		name    string
		err     error
		after   int
		refused bool
	}{
		{"not-supported", fmt.Errorf("fake: %w", cuda.ErrNotSupported), 0, true},
		{"invalid-value-after-one-copy", fmt.Errorf("fake: %w", cuda.ErrInvalidValue), 1, true},
		{"launch-failed", fmt.Errorf("fake: %w: %w", errInjected, cuda.ErrLaunchFailed), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := slowBatchEnv(t, 4, false)
			e.d.refuseBatch, e.d.refuseAfter = tc.err, tc.after
			src := randomBytes(n, 17)
			dev := e.d.alloc(n)
			err := e.c.ToDevice(context.Background(), dev, src)
			if in := e.d.inflight.Load(); in != 0 {
				t.Fatalf("%d bytes in flight after the transfer returned", in)
			}
			if !tc.refused {
				if !errors.Is(err, ErrCopy) || !errors.Is(err, cuda.ErrLaunchFailed) {
					t.Fatalf("a batch failing with %v: transfer returned %v", tc.err, err)
				}
				e.d.refuseBatch = nil
				before := e.c.stats.batched.Load()
				if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
					t.Fatal(err)
				}
				sameBytes(t, "device", e.devBytes(dev, n), src)
				if e.c.stats.batched.Load() == before {
					t.Error("the copier stopped batching after a batch failed for another reason than a refusal")
				}
				if got := e.c.Stats().BatchFallbacks; got != 0 {
					t.Errorf("BatchFallbacks = %d after a failure that was not a refusal", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("a driver refusing batches: %v", err)
			}
			sameBytes(t, "device", e.devBytes(dev, n), src)
			parked := e.c.stats.parked.Load()
			back := make([]byte, n)
			if err := e.c.FromDevice(context.Background(), back, dev); err != nil {
				t.Fatal(err)
			}
			sameBytes(t, "round trip", back, src)
			if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
				t.Fatal(err)
			}
			st := e.c.Stats()
			if st.BatchFallbacks != 1 {
				t.Errorf("BatchFallbacks = %d, want 1", st.BatchFallbacks)
			}
			if calls := e.d.batches.Load(); calls != 1 {
				t.Errorf("%d batch calls: the copier went on batching after the refusal", calls)
			}
			if got := e.c.stats.batched.Load(); got != 0 {
				t.Errorf("%d chunks counted as batched, but every batch was refused", got)
			}
			if got := e.c.stats.parked.Load(); got != parked {
				t.Errorf("%d chunks parked after the refusal", got-parked)
			}
			if n := settledStaging(e.c); n != 0 {
				t.Errorf("%d bytes of staging held after the transfers", n)
			}
		})
	}
}

// TestBatchRefusedCopiesFail refuses a batch and then fails every single
// copy, so that the fallback fails too: the transfer returns the copy's
// error with nothing in flight, the refusal is not counted, and once the
// driver recovers the copier batches again.
func TestBatchRefusedCopiesFail(t *testing.T) {
	const n = 40*testChunk + 13
	e := slowBatchEnv(t, 4, false)
	e.d.refuseBatch = fmt.Errorf("fake: %w", cuda.ErrNotSupported)
	e.d.failEnqueue = func(Direction, int) error {
		if e.d.batches.Load() > 0 {
			return fmt.Errorf("fake: %w: %w", errInjected, cuda.ErrLaunchFailed)
		}
		return nil
	}
	src := randomBytes(n, 19)
	dev := e.d.alloc(n)
	err := e.c.ToDevice(context.Background(), dev, src)
	if !errors.Is(err, ErrCopy) || !errors.Is(err, errInjected) {
		t.Fatalf("got %v, want the single copy's error", err)
	}
	if in := e.d.inflight.Load(); in != 0 {
		t.Fatalf("%d bytes in flight after the transfer returned", in)
	}
	if got := e.c.Stats().BatchFallbacks; got != 0 {
		t.Errorf("BatchFallbacks = %d after a fallback that failed", got)
	}
	e.d.refuseBatch, e.d.failEnqueue = nil, nil
	if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "device", e.devBytes(dev, n), src)
	if e.c.stats.batched.Load() == 0 {
		t.Error("no chunk batched once the driver took batches again")
	}
	if n := settledStaging(e.c); n != 0 {
		t.Errorf("%d bytes of staging held after the transfers", n)
	}
}

// TestBatchRefusedConcurrent runs chunked round trips from six goroutines
// over a driver that refuses batches, then closes the copier while they
// run: the refusal is counted once, though both directions may have a
// batch refused at the same moment, every transfer returns its bytes or
// ErrClosed, and nothing is left held (the env's cleanup checks events,
// streams and staging).
func TestBatchRefusedConcurrent(t *testing.T) {
	for round := range 3 {
		e := slowBatchEnv(t, 8, false)
		e.d.refuseBatch = fmt.Errorf("fake: %w", cuda.ErrNotSupported)
		e.closeDuringRoundTrips(6, 12*testChunk+3, uint64(20*round), time.Duration(round+1)*5*time.Millisecond)
		st := e.c.Stats()
		if st.BatchFallbacks != 1 {
			t.Errorf("round %d: BatchFallbacks = %d, want 1", round, st.BatchFallbacks)
		}
		if got := e.c.stats.batched.Load(); got != 0 {
			t.Errorf("round %d: %d chunks counted as batched, but every batch was refused", round, got)
		}
		if st.StagingBytes != 0 {
			t.Errorf("round %d: %d bytes of staging held after Close", round, st.StagingBytes)
		}
	}
}
