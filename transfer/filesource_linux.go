package transfer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directAlign is the alignment of O_DIRECT reads: offset, length and
// memory, the page size (which covers every logical block size in use).
const directAlign = 4096

// source reads the pieces of a file. For an *os.File it asks the kernel
// whether a piece is in the page cache, without reading it (cachestat,
// Linux 6.5; mincore of a mapping of the range before that): a cached
// piece is copied from the page cache; one that is not is read with
// O_DIRECT from a second descriptor of the file, straight into the pinned
// buffer, skipping the page cache's copy and its readahead. A buffered
// read with RWF_NOWAIT as the probe halved the cold rate (it starts
// readahead of what it misses, read a second time by O_DIRECT): see
// docs/results/2026-12-01-files-to-gpu.md. O_DIRECT turns itself off, for
// the rest of the transfer, at the first sign that the file system does
// not have it (EINVAL), and so does a probe that the kernel does not have;
// then pieces go through ReadAt.
type source struct {
	r      io.ReaderAt
	fd     int      // the file's descriptor, for the probe; -1: none
	size   int64    // the file's size when opened
	direct *os.File // the same file opened with O_DIRECT; nil: none

	useDirect        atomic.Bool
	probe            atomic.Int32 // probeCachestat, probeMincore or probeNone
	cached, directed atomic.Int64 // bytes read each way (tests)
}

const (
	probeCachestat = iota
	probeMincore
	probeNone
)

// sourceWays switches O_DIRECT off, or the probe down to mincore, for
// benchmarks and tests that compare the ways.
var sourceWays = struct {
	direct   bool
	firstWay int32
}{true, probeCachestat}

func openSource(r io.ReaderAt) *source {
	s := &source{r: r, fd: -1}
	f, ok := r.(*os.File)
	if !ok || !sourceWays.direct {
		return s
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return s
	}
	// Reopen through /proc, so that the O_DIRECT flag does not change the
	// caller's descriptor, and the name need not still lead to the file.
	d, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return s // tmpfs and others refuse O_DIRECT at open
	}
	s.fd, s.size, s.direct = int(f.Fd()), fi.Size(), d
	s.useDirect.Store(true)
	s.probe.Store(sourceWays.firstWay)
	return s
}

func (s *source) close() {
	if s.direct != nil {
		s.direct.Close()
	}
}

// readAt reads n bytes at off into the staging buffer buf (page-aligned,
// ChunkSize bytes) and returns them: a sub-slice of buf, which starts
// where off lies in its page when the piece was read with O_DIRECT.
func (s *source) readAt(buf []byte, off int64, n int) ([]byte, error) {
	start := off &^ (directAlign - 1)
	end := off + int64(n)
	span := (end - start + directAlign - 1) &^ (directAlign - 1)
	if s.fd < 0 || span > int64(len(buf)) || !s.useDirect.Load() || s.inCache(start, end) {
		s.cached.Add(int64(n))
		return s.plain(buf[:n], off)
	}
	delta := int(off - start)
	k, err := s.direct.ReadAt(buf[:span], start) // loops until span bytes or the end of the file
	if err == nil || errors.Is(err, io.EOF) {
		if got := start + int64(k); got < end {
			return nil, fmt.Errorf("the file ends at %d, before %d: %w", got, end, io.ErrUnexpectedEOF)
		}
		s.directed.Add(int64(n))
		return buf[delta : delta+n], nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return nil, fmt.Errorf("reading at %d: %w", start, err)
	}
	s.useDirect.Store(false) // the file system takes no O_DIRECT here
	s.cached.Add(int64(n))
	return s.plain(buf[:n], off)
}

// inCache reports whether every page of [start, end) (start page-aligned)
// that lies in the file is in the page cache. A probe the kernel does not
// have gives way to the next; with none left, every piece counts as
// cached (read through the page cache: never slower than a buffered read).
func (s *source) inCache(start, end int64) bool {
	end = min(end, s.size)
	if end <= start {
		return true
	}
	pages := uint64((end - start + directAlign - 1) / directAlign)
	for {
		switch s.probe.Load() {
		case probeCachestat:
			var st unix.Cachestat_t
			err := unix.Cachestat(uint(s.fd), &unix.CachestatRange{Off: uint64(start), Len: uint64(end - start)}, &st, 0)
			if err == nil {
				return st.Cache >= pages
			}
			s.probe.CompareAndSwap(probeCachestat, probeMincore) // ENOSYS before Linux 6.5
		case probeMincore:
			if cached, err := mincoreCached(s.fd, start, end); err == nil {
				return cached
			}
			s.probe.CompareAndSwap(probeMincore, probeNone)
		default:
			return true
		}
	}
}

// mincoreCached maps [start, end) of the file (start page-aligned) without
// touching it and asks mincore whether every page is resident.
func mincoreCached(fd int, start, end int64) (bool, error) {
	m, err := unix.Mmap(fd, start, int(end-start), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return false, err
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(m))), uintptr(len(m)), uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
		return false, e
	}
	for _, v := range vec {
		if v&1 == 0 {
			return false, nil
		}
	}
	return true, nil
}

// plain reads b at off through the file's ReadAt (the page cache).
func (s *source) plain(b []byte, off int64) ([]byte, error) {
	if err := readFullAt(s.r, b, off); err != nil {
		return nil, err
	}
	return b, nil
}
