package transfer

import (
	"context"
	"fmt"
	"testing"
)

// TestCopyBytes checks both kinds of single-goroutine copy around the
// cached copy's step.
func TestCopyBytes(t *testing.T) {
	for _, cached := range []bool{false, true} {
		for i, n := range []int{0, 1, cachedStep - 1, cachedStep, cachedStep + 1, 5*cachedStep + 3} {
			src := randomBytes(n, uint64(i))
			dst := make([]byte, n+1)
			dst[n] = 0xA5
			copyBytes(dst[:n], src, cached)
			sameBytes(t, fmt.Sprintf("cached=%v, %d bytes", cached, n), dst[:n], src)
			if dst[n] != 0xA5 {
				t.Fatalf("cached=%v, %d bytes: wrote past the end", cached, n)
			}
		}
	}
}

// TestStreamBytes checks the non-temporal copy at every alignment of the
// destination and lengths around its 16-byte head and 64-byte body.
func TestStreamBytes(t *testing.T) {
	buf := make([]byte, 4096+64)
	for align := range 17 {
		for _, n := range []int{0, 1, 15, 16, 63, 64, 65, 79, 80, 127, 128, 129, 1000, 4096} {
			src := randomBytes(n, uint64(n*31+align))
			for i := range buf {
				buf[i] = 0xA5
			}
			dst := buf[align : align+n]
			streamBytes(dst, src)
			sameBytes(t, fmt.Sprintf("align %d, %d bytes", align, n), dst, src)
			for i, c := range buf {
				if (i < align || i >= align+n) && c != 0xA5 {
					t.Fatalf("align %d, %d bytes: wrote byte %d outside", align, n, i)
				}
			}
		}
	}
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
	unit := planStaging(n, HostToDevice, 1, false, e.c.opt, e.c.tune).chunk
	chunks := (n + unit - 1) / unit
	if st.Chunks != uint64(2*chunks) || st.ToDevice.Staged.Bytes != n || st.FromDevice.Staged.Bytes != n || st.Last.GBps() <= 0 {
		t.Fatalf("stats %+v", st)
	}
	if m := e.d.maxAsyncLen.Load(); m != int64(unit) {
		t.Fatalf("largest chunk %d", m)
	}
}

// TestEvictBytes checks that evicting a slice's lines from the caches
// leaves its bytes, and those around it in the same lines, as they were.
func TestEvictBytes(t *testing.T) {
	buf := randomBytes(8192, 77)
	want := append([]byte(nil), buf...)
	for _, r := range [][2]int{{0, 0}, {0, 1}, {1, 63}, {5, 4000}, {64, 128}, {100, 8192}} {
		evictBytes(buf[r[0]:r[1]])
		sameBytes(t, fmt.Sprintf("after evicting [%d, %d)", r[0], r[1]), buf, want)
	}
	t.Logf("CLFLUSHOPT available: %v", canEvict)
}
