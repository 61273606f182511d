package transfer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cuda"
)

// TestQuickStreamPrivate checks that a synchronous copy of pool memory runs
// alone on a private stream (not one of the copier's shared streams), that
// the stream is kept for the next copy, and that the bytes arrive.
func TestQuickStreamPrivate(t *testing.T) {
	e := newEnv(t, Options{ChunkSize: testChunk, Streams: 2})
	ctx := context.Background()
	buf, err := e.pool.Get(ctx, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Release()
	dev := e.d.alloc(4096)
	for i := range 3 {
		src := randomBytes(4096, uint64(i))
		copy(buf.Bytes(), src)
		if err := e.c.ToDeviceBuffer(ctx, dev, buf); err != nil {
			t.Fatal(err)
		}
		sameBytes(t, "device after ToDeviceBuffer", e.devBytes(dev, 4096), src)
		clear(buf.Bytes())
		if err := e.c.FromDeviceBuffer(ctx, buf, dev); err != nil {
			t.Fatal(err)
		}
		sameBytes(t, "buffer after FromDeviceBuffer", buf.Bytes(), src)
	}
	log := e.d.copies()
	if len(log) != 6 {
		t.Fatalf("%d asynchronous copies ran, want 6", len(log))
	}
	for _, cp := range log {
		if cp.stream <= 2 {
			t.Errorf("%s copy ran on shared stream %d, want a private one", cp.dir, cp.stream)
		}
		if cp.stream != log[0].stream {
			t.Errorf("copies ran on streams %d and %d, want the one private stream reused", log[0].stream, cp.stream)
		}
	}
	if n := e.d.streams.Load(); n != 3 {
		t.Errorf("%d live streams, want 2 shared + 1 private", n)
	}
}

// TestQuickStreamBound holds every private stream's copy (a gate on streams
// made after the shared ones) and checks that the copies beyond
// maxQuickStreams fall back to the shared streams and finish meanwhile.
func TestQuickStreamBound(t *testing.T) {
	e := newEnv(t, Options{ChunkSize: testChunk, Streams: 2})
	ctx := context.Background()
	const extra = 5
	n := maxQuickStreams + extra
	bufs := make([][]byte, n)
	for i := range bufs {
		b, err := e.pool.Get(ctx, 4096)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		bufs[i] = b.Bytes()
		copy(bufs[i], fmt.Sprintf("buffer %d", i))
	}
	dev := e.d.alloc(4096 * n)
	gate := make(chan struct{})
	e.d.gate = gate // streams made from now on (the private ones) wait for it
	var wg sync.WaitGroup
	done := make(chan int, n)
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := e.c.ToDevice(ctx, dev+cuda.DevicePtr(4096*i), bufs[i]); err != nil {
				errs <- err
			}
			done <- i
		})
	}
	// Every private stream ends up lent to a held copy; the others finish.
	for range extra {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("copies beyond the %d private streams did not finish on the shared streams", maxQuickStreams)
		}
	}
	if live := e.d.streams.Load(); live != 2+maxQuickStreams {
		t.Errorf("%d live streams, want 2 shared + %d private", live, maxQuickStreams)
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range n {
		want := fmt.Sprintf("buffer %d", i)
		if got := string(e.devBytes(dev+cuda.DevicePtr(4096*i), len(want))); got != want {
			t.Errorf("device block %d holds %q, want %q", i, got, want)
		}
	}
}

// TestQuickStreamFailures injects a failure when the copy is queued (the
// stream is kept) and when it runs (the stream is destroyed), and checks
// the errors, that later copies work, and (in the env's cleanup) that no
// stream outlives Close.
func TestQuickStreamFailures(t *testing.T) {
	e := newEnv(t, Options{ChunkSize: testChunk, Streams: 2})
	ctx := context.Background()
	buf, err := e.pool.Get(ctx, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Release()
	dev := e.d.alloc(4096)
	boom := errors.New("injected")
	fail := func(Direction, int) error { return boom }

	if err := e.c.ToDeviceBuffer(ctx, dev, buf); err != nil { // makes the private stream
		t.Fatal(err)
	}
	e.d.failEnqueue = fail
	err = e.c.ToDeviceBuffer(ctx, dev, buf)
	e.d.failEnqueue = nil
	if !errors.Is(err, ErrCopy) || !errors.Is(err, boom) {
		t.Fatalf("enqueue failure: got %v, want ErrCopy wrapping the injected error", err)
	}
	if n := e.d.streams.Load(); n != 3 {
		t.Errorf("after an enqueue failure %d live streams, want 3 (the private one kept)", n)
	}

	e.d.failExec = fail
	err = e.c.FromDeviceBuffer(ctx, buf, dev)
	e.d.failExec = nil
	if !errors.Is(err, ErrCopy) || !errors.Is(err, boom) {
		t.Fatalf("execution failure: got %v, want ErrCopy wrapping the injected error", err)
	}
	if n := e.d.streams.Load(); n != 2 {
		t.Errorf("after an execution failure %d live streams, want 2 (the private one destroyed)", n)
	}

	copy(buf.Bytes(), "after the failures")
	if err := e.c.ToDeviceBuffer(ctx, dev, buf); err != nil {
		t.Fatal(err)
	}
	if got := string(e.devBytes(dev, 18)); got != "after the failures" {
		t.Errorf("device holds %q after a copy that followed the failures", got)
	}
	if s := e.c.Stats(); s.Failed != 2 {
		t.Errorf("Stats.Failed = %d, want 2", s.Failed)
	}
}
