//go:build linux

package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFileTruncatedDuringLoad cuts the file short while ToDeviceFromFile
// reads it (the fake device truncates it when the first piece is queued,
// before the window lets most pieces be read), each way the source reads a
// piece: the reads past the new end come back short, and the transfer ends
// with an error wrapping ErrFileChanged and io.ErrUnexpectedEOF (before,
// pread's short read said only io.ErrUnexpectedEOF); the count is what
// arrived, and the pool holds nothing.
func TestFileTruncatedDuringLoad(t *testing.T) {
	defer func() { sourceWays.direct, sourceWays.firstWay = true, probeCachestat }()
	for _, w := range []struct {
		name   string
		direct bool
		probe  int32
	}{{"default", true, probeCachestat}, {"mincore", true, probeMincore}, {"pread", false, probeNone}} {
		t.Run(w.name, func(t *testing.T) {
			sourceWays.direct, sourceWays.firstWay = w.direct, w.probe
			e := newEnv(t, streamOpts)
			const n = 2 << 20
			data := randomBytes(n, 13)
			f := writeTemp(t, data)
			truncateOnFirstCopy(t, e, f)
			dev := e.d.alloc(n)
			got, err := e.c.ToDeviceFromFile(context.Background(), dev, f, 0, n)
			if !errors.Is(err, ErrFileChanged) || !errors.Is(err, io.ErrUnexpectedEOF) || got >= n {
				t.Fatalf("%d bytes, %v; want fewer than %d and ErrFileChanged", got, err, n)
			}
			sameBytes(t, "what arrived", e.devBytes(dev, int(got)), data[:got])
			if st := e.c.Stats(); st.Failed != 1 || st.ToDevice.Stream.Transfers != 0 {
				t.Fatalf("Stats: %d failed, %d stream transfers; want 1 and 0", st.Failed, st.ToDevice.Stream.Transfers)
			}
			if err := e.c.Close(); err != nil {
				t.Fatal(err)
			}
			e.checkPool(false)
		})
	}
}

// TestCopyInFault copies from a mapping whose file was truncated, as a
// staged lane does for ToDevice of a mapped file: an error wrapping
// ErrFileChanged that names the address of a lost page, not a crash.
func TestCopyInFault(t *testing.T) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	f := writeTemp(t, randomBytes(1<<20, 14))
	m, err := unix.Mmap(int(f.Fd()), 0, 1<<20, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Skipf("cannot map the file: %v", err)
	}
	defer unix.Munmap(m)
	dst := make([]byte, len(m))
	for _, stream := range []bool{false, true} {
		if err := copyIn(dst, m, stream); err != nil {
			t.Fatalf("before the truncation: %v", err)
		}
	}
	if err := f.Truncate(256 << 10); err != nil {
		t.Fatal(err)
	}
	for _, stream := range []bool{false, true} {
		err := copyIn(dst, m, stream)
		var sf *sourceFault
		if !errors.As(err, &sf) || !errors.Is(err, ErrFileChanged) {
			t.Fatalf("after the truncation: %v; want a sourceFault", err)
		}
		// qemu-user, which runs the arm64 tests here, reports the fault without its address.
		if sf.addr != 0 || runtime.GOARCH == "amd64" {
			if at := sf.addr - uintptr(unsafePointer(m)); at < 256<<10 || at >= 1<<20 {
				t.Fatalf("the fault at %d of the mapping; want a page past the new end, %d", at, 256<<10)
			}
		}
		if err := copyIn(dst[:256<<10], m[:256<<10], stream); err != nil {
			t.Fatalf("the part still in the file: %v", err)
		}
	}
}

// TestFileProbeCached: a file just written is in the page cache, and each
// probe says so for ranges at any offset (the probe rounds to the
// system's page size, not to 4 KiB: on a system of 64 KiB pages a 4 KiB
// count never matched and cached files were read with O_DIRECT).
func TestFileProbeCached(t *testing.T) {
	data := randomBytes(3<<20+5, 15)
	f := writeTemp(t, data)
	if _, err := io.Copy(io.Discard, io.NewSectionReader(f, 0, int64(len(data)))); err != nil {
		t.Fatal(err)
	}
	defer func() { sourceWays.firstWay = probeCachestat }()
	for _, way := range []int32{probeCachestat, probeMincore} {
		sourceWays.firstWay = way
		s := openSource(f)
		for _, r := range [][2]int64{{0, 1}, {1, 4097}, {12345, 2 << 20}, {3 << 20, 3<<20 + 5}, {0, int64(len(data))}} {
			if s.inCache(r[0], r[1]) < 1 {
				t.Errorf("probe %d: [%d, %d) of a cached file reported not cached", s.probe.Load(), r[0], r[1])
			}
		}
		s.close()
	}
}

// TestFileMixed: a file half in the page cache is read each range its own
// way: the cached half through the page cache, the other with O_DIRECT.
func TestFileMixed(t *testing.T) {
	const half = 2 << 20
	data := randomBytes(2*half, 16)
	f := writeTemp(t, data)
	// The file was just written, so it is cached: drop its second half.
	dropCache(t, f, half, half)
	s := openSource(f)
	defer s.close()
	if s.direct == nil {
		t.Skipf("O_DIRECT not available in %s", filepath.Dir(f.Name()))
	}
	if s.inCache(half, 2*half) >= 1 {
		t.Skip("the kernel read the second half ahead: nothing is cold")
	}
	buf := make([]byte, 2<<20+directAlign)
	al := buf[directAlign-int(uintptr(unsafePointer(buf))%directAlign):][: 2<<20 : 2<<20]
	for _, r := range [][2]int64{{0, 1 << 20}, {1 << 20, 1 << 20}, {half, 1 << 20}, {half + 1<<20, 1 << 20}} {
		got, err := s.readAt(context.Background(), al, r[0], int(r[1]))
		if err != nil || !bytes.Equal(got, data[r[0]:r[0]+r[1]]) {
			t.Fatalf("readAt(%d, %d): %v (or bytes differ)", r[0], r[1], err)
		}
	}
	if s.directed.Load() != half || s.cached.Load() != half {
		t.Fatalf("O_DIRECT %d, ReadAt %d bytes; want %d, %d", s.directed.Load(), s.cached.Load(), half, half)
	}
}

// TestFileWays moves a file to the fake device every way BenchmarkFileCold
// compares (O_DIRECT or buffered reads, from a dropped or a warm page
// cache, several lanes and piece sizes), byte-exact.
func TestFileWays(t *testing.T) {
	defer func() { sourceWays.direct = true }()
	const n = 3<<20 + 333
	data := randomBytes(n+7, 17)
	f := writeTemp(t, data)
	for _, opt := range []Options{{Lanes: 4, ChunkSize: 256 << 10, WindowBytes: 2 << 20}, {Lanes: 2, ChunkSize: 1 << 20, WindowBytes: 4 << 20}} {
		e := newEnv(t, opt)
		for _, direct := range []bool{true, false} {
			for _, cold := range []bool{true, false} {
				sourceWays.direct = direct
				if cold {
					dropCache(t, f, 0, 0)
				}
				dev := e.d.alloc(n)
				way := fmt.Sprintf("direct %v, cold %v, %+v", direct, cold, opt)
				if got, err := e.c.ToDeviceFromFile(context.Background(), dev, f, 7, n); err != nil || got != n {
					t.Fatalf("%s: %d bytes, %v", way, got, err)
				}
				sameBytes(t, way, e.devBytes(dev, n), data[7:])
			}
		}
	}
}

// TestToDeviceMappedTruncated stages a mapping of a file that is cut short
// while the lanes copy it, in both modes and with several lanes: a lane
// (the caller's or a standing one) that faults on a lost page ends the
// transfer with ErrFileChanged instead of a crash, and every staging
// buffer goes back.
func TestToDeviceMappedTruncated(t *testing.T) {
	for _, tc := range []struct {
		name string
		tu   tuning
	}{{"cooperative", defaultTuning()}, {"chunked", chunkedOnly()}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 4 << 20
			e := newEnvTuned(t, Options{Lanes: 4, ChunkSize: 256 << 10, WindowBytes: 8 << 20}, tc.tu)
			f := writeTemp(t, randomBytes(n, 18))
			m, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ, unix.MAP_SHARED)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Munmap(m)
			truncateOnFirstCopy(t, e, f)
			err = e.c.ToDevice(context.Background(), e.d.alloc(n), m)
			var sf *sourceFault
			if !errors.Is(err, ErrFileChanged) || !errors.As(err, &sf) {
				t.Fatalf("%v; want ErrFileChanged", err)
			}
			if st := e.c.Stats(); st.Failed != 1 {
				t.Fatalf("Stats: %d failed; want 1", st.Failed)
			}
			if err := e.c.Close(); err != nil {
				t.Fatal(err)
			}
			e.checkPool(false)
		})
	}
}

// TestFileMixedLoad loads a file whose second half is not in the page cache: one transfer of its
// bytes under PathStream, byte-exact.
func TestFileMixedLoad(t *testing.T) {
	const half = 2 << 20
	e := newEnv(t, Options{Lanes: 4, ChunkSize: 256 << 10, WindowBytes: 4 << 20})
	data := randomBytes(2*half, 19)
	f := writeTemp(t, data)
	dropCache(t, f, half, half)
	dev := e.d.alloc(2*half - 5)
	if got, err := e.c.ToDeviceFromFile(context.Background(), dev, f, 5, 2*half-5); err != nil || got != 2*half-5 {
		t.Fatalf("%d bytes, %v", got, err)
	}
	sameBytes(t, "mixed file", e.devBytes(dev, 2*half-5), data[5:])
	if st := e.c.Stats(); st.ToDevice.Stream.Transfers != 1 || st.ToDevice.Staged.Transfers != 0 {
		t.Fatalf("Stats: %d stream, %d staged transfers; want 1, 0", st.ToDevice.Stream.Transfers, st.ToDevice.Staged.Transfers)
	}
}

// truncateOnFirstCopy cuts f to nothing when the fake device queues the first copy.
func truncateOnFirstCopy(t *testing.T, e *env, f *os.File) {
	var cut atomic.Bool
	e.d.failEnqueue = func(Direction, int) error {
		if !cut.Swap(true) {
			if err := f.Truncate(0); err != nil {
				t.Errorf("truncate: %v", err)
			}
		}
		return nil
	}
}

// barrierReader holds every ReadAt until want of them are under way at once (or 30 s have passed,
// which fails the read), and records the most under way at once.
type barrierReader struct {
	r        io.ReaderAt
	want     int32
	in, most atomic.Int32
	met      chan struct{}
	once     sync.Once
}

func (b *barrierReader) ReadAt(p []byte, off int64) (int, error) {
	k := b.in.Add(1)
	defer b.in.Add(-1)
	for m := b.most.Load(); k > m && !b.most.CompareAndSwap(m, k); m = b.most.Load() {
	}
	if k >= b.want {
		b.once.Do(func() { close(b.met) })
	}
	select {
	case <-b.met:
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("%d reads under way at once, never %d", b.most.Load(), b.want)
	}
	return b.r.ReadAt(p, off)
}

// TestFileBorrowsLanes: a file load reads with the other direction's idle standing lanes and
// window too (fileReaders, move): with Lanes 2 (one standing lane a direction), windows of two
// slots and processors to spare, three reads are under way at once, each in a slot of its own;
// with the window not borrowed, or neither, two.
func TestFileBorrowsLanes(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	defer func() { fileBorrow.lanes, fileBorrow.window = true, true }()
	const n, chunk = 1 << 20, 64 << 10
	data := randomBytes(n, 20)
	for _, tc := range []struct {
		lanes, window bool
		want          int32
	}{{true, true, 3}, {true, false, 2}, {false, false, 2}} {
		fileBorrow.lanes, fileBorrow.window = tc.lanes, tc.window
		e := newEnv(t, Options{Lanes: 2, ChunkSize: chunk, WindowBytes: 2 * chunk})
		r := &barrierReader{r: bytes.NewReader(data), want: tc.want, met: make(chan struct{})}
		dev := e.d.alloc(n)
		if got, err := e.c.ToDeviceFromFile(context.Background(), dev, r, 0, n); err != nil || got != n {
			t.Fatalf("%+v: %d bytes, %v", tc, got, err)
		}
		sameBytes(t, "the file on the device", e.devBytes(dev, n), data)
		st := e.c.Stats()
		if m := r.most.Load(); m != tc.want || st.PeakStaging < int64(m)*chunk || st.PeakStaging > 2*st.WindowBytes {
			t.Fatalf("%+v: %d reads under way at once, staging peak %d; want %d reads", tc, m, st.PeakStaging, tc.want)
		}
	}
}
