package transfer

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestWorkersCopy checks the parallel copy for sizes around the piece size,
// from several goroutines at once (more than there are workers, so some
// pieces are copied by their caller).
func TestWorkersCopy(t *testing.T) {
	w := newWorkers(4)
	defer w.stop()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, n := range []int{0, 1, minPiece - 1, minPiece, 2*minPiece + 1, 4*minPiece + 63, 9*minPiece + 5} {
				src := randomBytes(n, uint64(g*10+i))
				dst := make([]byte, n)
				w.copy(dst, src)
				sameBytes(t, fmt.Sprintf("%d bytes", n), dst, src)
			}
		}()
	}
	wg.Wait()
}

// TestLargeDefaultChunk stages a large odd size with the default chunk and
// window, both ways.
func TestLargeDefaultChunk(t *testing.T) {
	if testing.Short() {
		t.Skip("large copy")
	}
	e := newEnv(t, Options{Prewarm: true})
	if st := e.pool.Stats(); st.BytesIdle < DefaultWindowBytes {
		t.Fatalf("Prewarm left %d idle bytes", st.BytesIdle)
	}
	const n = 48<<20 + 7
	src := randomBytes(n, 11)
	dev := e.d.alloc(n)
	if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "device", e.devBytes(dev, n), src)
	back := make([]byte, n)
	if err := e.c.FromDeviceAsync(context.Background(), back, dev).Wait(); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "back", back, src)
	st := e.c.Stats()
	chunks := (n + DefaultChunkSize - 1) / DefaultChunkSize
	if st.Chunks != uint64(2*chunks) || st.ToDevice.Staged.Bytes != n || st.FromDevice.Staged.Bytes != n || st.Last.GBps() <= 0 {
		t.Fatalf("stats %+v", st)
	}
	if m := e.d.maxAsyncLen.Load(); m != DefaultChunkSize {
		t.Fatalf("largest chunk %d", m)
	}
}
