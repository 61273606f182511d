//go:build linux

package transfer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFileTruncatedDuringLoad cuts the file short while ToDeviceFromFile
// copies it from its mapping (the fake device truncates it when the first
// piece is queued, before the window lets most pieces be read): the pieces
// that touch the lost pages fault, and the transfer ends with an error
// wrapping ErrFileChanged and io.ErrUnexpectedEOF instead of a SIGBUS that
// ends the process; the count is what arrived, and the pool holds nothing.
func TestFileTruncatedDuringLoad(t *testing.T) {
	defer func() { sourceWays.direct, sourceWays.firstWay = true, probeCachestat }()
	// Every piece from the mapping: no O_DIRECT, and no probe, which would
	// send the pieces past the new end to ReadAt.
	sourceWays.direct, sourceWays.firstWay = false, probeNone
	e := newEnv(t, streamOpts)
	const n = 2 << 20
	data := randomBytes(n, 13)
	f := writeTemp(t, data)
	var cut atomic.Bool
	e.d.failEnqueue = func(Direction, int) error {
		if !cut.Swap(true) {
			if err := f.Truncate(0); err != nil {
				t.Errorf("truncate: %v", err)
			}
		}
		return nil
	}
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
}

// TestCopyMappedFault reads a mapping whose file was truncated: an error,
// not a crash, naming the offset of the first lost page.
func TestCopyMappedFault(t *testing.T) {
	f := writeTemp(t, randomBytes(1<<20, 14))
	m, err := unix.Mmap(int(f.Fd()), 0, 1<<20, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	dst := make([]byte, len(m))
	if err := copyMapped(dst, m, 0); err != nil {
		t.Fatalf("before the truncation: %v", err)
	}
	if err := f.Truncate(256 << 10); err != nil {
		t.Fatal(err)
	}
	err = copyMapped(dst, m, 0)
	if !errors.Is(err, ErrFileChanged) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("after the truncation: %v; want ErrFileChanged", err)
	}
	t.Log(err)
	if err := copyMapped(dst[:256<<10], m[:256<<10], 0); err != nil {
		t.Fatalf("the part still in the file: %v", err)
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
		s := openSource(f, 0, int64(len(data)))
		for _, r := range [][2]int64{{0, 1}, {1, 4097}, {12345, 2 << 20}, {3 << 20, 3<<20 + 5}, {0, int64(len(data))}} {
			if !s.inCache(r[0], r[1]) {
				t.Errorf("probe %d: [%d, %d) of a cached file reported not cached", s.probe.Load(), r[0], r[1])
			}
		}
		s.close()
	}
}

// TestFileMixed: a file half in the page cache is read each range its own
// way: the cached half from the mapping, the other with O_DIRECT.
func TestFileMixed(t *testing.T) {
	const half = 2 << 20
	data := randomBytes(2*half, 16)
	f := writeTemp(t, data)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	// The file was just written, so it is cached: drop its second half.
	if err := unix.Fadvise(int(f.Fd()), half, half, unix.FADV_DONTNEED); err != nil {
		t.Skipf("cannot drop the file from the page cache: %v", err)
	}
	s := openSource(f, 0, 2*half)
	defer s.close()
	if s.direct == nil || s.mapped == nil {
		t.Skipf("O_DIRECT (%v) or the mapping (%v) not available here", s.direct != nil, s.mapped != nil)
	}
	if s.inCache(half, 2*half) {
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
	if s.mmapd.Load() != half || s.directed.Load() != half || s.cached.Load() != 0 {
		t.Fatalf("mapping %d, O_DIRECT %d, ReadAt %d bytes; want %d, %d, 0", s.mmapd.Load(), s.directed.Load(), s.cached.Load(), half, half)
	}
}

// TestFileWays moves a cached file to the fake device every way the
// benchmarks compare, byte-exact.
func TestFileWays(t *testing.T) {
	defer func() {
		sourceWays.mapped, sourceWays.populate, sourceWays.evict, sourceWays.keep, sourceWays.cachedStores = true, false, false, false, false
	}()
	e := newEnv(t, streamOpts)
	const n = 1<<20 + 333
	data := randomBytes(n+7, 17)
	f := writeTemp(t, data)
	for _, w := range []struct {
		name                          string
		mapped, populate, evict, keep bool
	}{
		{"mapped", true, false, false, false}, {"populate", true, true, false, false}, {"mapped+keep", true, false, false, true},
		{"pread", false, false, false, false}, {"pread+evict", false, false, true, false}, {"cached stores", true, false, false, false},
	} {
		sourceWays.mapped, sourceWays.populate, sourceWays.evict, sourceWays.keep = w.mapped, w.populate, w.evict, w.keep
		sourceWays.cachedStores = w.name == "cached stores"
		dev := e.d.alloc(n)
		if got, err := e.c.ToDeviceFromFile(context.Background(), dev, f, 7, n); err != nil || got != n {
			t.Fatalf("%s: %d bytes, %v", w.name, got, err)
		}
		sameBytes(t, w.name, e.devBytes(dev, n), data[7:])
	}
}
