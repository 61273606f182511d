//go:build linux

package transfer

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"
)

// TestSourceCold checks which file ranges count as cold (read mostly with O_DIRECT, by fewer
// lanes): one in the page cache is not, one dropped from it is. (A part dropped leaves the kernel's
// per-CPU batches of pages behind, so the half-way line is not tested here.)
func TestSourceCold(t *testing.T) {
	const n = 4 << 20
	f := writeTemp(t, randomBytes(n, 31))
	s := openSource(f)
	defer s.close()
	if s.direct == nil {
		t.Skipf("O_DIRECT not available in %s", filepath.Dir(f.Name()))
	}
	for _, tc := range []struct {
		name    string
		dropped int64 // bytes dropped from the page cache, from the start
		want    bool
	}{{"cached", 0, false}, {"dropped", n, true}} {
		if _, err := io.Copy(io.Discard, io.NewSectionReader(f, 0, n)); err != nil {
			t.Fatal(err)
		}
		if tc.dropped > 0 {
			dropCache(t, f, 0, tc.dropped)
		}
		if got := s.cold(0, n); got != tc.want {
			t.Errorf("%s: cold %v, want %v", tc.name, got, tc.want)
		}
	}
	if s.cold(n, n) {
		t.Errorf("an empty range is cold")
	}
}

// TestFileColdDepth loads a file dropped from the page cache while the device holds every copy a
// while: at most four lanes read it (coldReaders), each keeping one piece in flight, so the pieces
// in flight never exceed min(Lanes, 4), whatever the window would allow, and the bytes arrive.
func TestFileColdDepth(t *testing.T) {
	for _, lanes := range []int{2, 8} {
		t.Run(fmt.Sprintf("lanes=%d", lanes), func(t *testing.T) {
			const n, chunk = 4 << 20, 64 << 10
			data := randomBytes(n, 32)
			f := writeTemp(t, data)
			e := newEnv(t, Options{Lanes: lanes, ChunkSize: chunk, WindowBytes: 16 * chunk})
			if s := openSource(f); s.direct == nil {
				s.close()
				t.Skipf("O_DIRECT not available in %s", filepath.Dir(f.Name()))
			} else {
				defer s.close()
				dropCache(t, f, 0, 0)
				if !s.cold(0, n) {
					t.Skip("the kernel kept the file in the page cache")
				}
			}
			slow := func() { time.Sleep(200 * time.Microsecond) }
			e.d.hold.Store(&slow)
			dev := e.d.alloc(n)
			if got, err := e.c.ToDeviceFromFile(context.Background(), dev, f, 0, n); err != nil || got != n {
				t.Fatalf("%d bytes, %v", got, err)
			}
			sameBytes(t, "device", e.devBytes(dev, n), data)
			if m, most := e.d.maxInflight.Load(), min(lanes, 4); m > int64(most*chunk) {
				t.Errorf("%d bytes in flight at once, more than %d readers of one %d-byte piece", m, most, chunk)
			}
		})
	}
}
