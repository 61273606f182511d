package transfer

import (
	"context"
	"errors"
	"testing"
)

// TestPinnedCopy copies a pool buffer both ways (PathPinned, one
// asynchronous copy on a shared stream and its event), fails an enqueue
// and an execution (each a typed error, counted as failed), and checks
// that the copy after the failures moves every byte.
func TestPinnedCopy(t *testing.T) {
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
	e.d.failEnqueue = fail
	err = e.c.ToDeviceBuffer(ctx, dev, buf)
	e.d.failEnqueue = nil
	if !errors.Is(err, ErrCopy) || !errors.Is(err, boom) {
		t.Fatalf("enqueue failure: got %v, want ErrCopy wrapping the injected error", err)
	}

	e.d.failExec = fail
	err = e.c.FromDeviceBuffer(ctx, buf, dev)
	e.d.failExec = nil
	if !errors.Is(err, ErrCopy) || !errors.Is(err, boom) {
		t.Fatalf("execution failure: got %v, want ErrCopy wrapping the injected error", err)
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
