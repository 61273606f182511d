package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directAlign is the alignment of O_DIRECT reads (offset, length and memory): 4 KiB covers every
// logical block size in use. The page-cache probe uses the system's page size (os.Getpagesize),
// larger on some arm64 systems.
const directAlign = 4096

// source reads the pieces of a file. For an *os.File open for reading it asks the kernel which
// pieces are in the page cache (cachestat, Linux 6.5; before that, mincore of a read-only mapping
// of the range), in the system's pages, and reads each piece its fastest way
// (BenchmarkFileToDevice, BenchmarkFileCold):
//
//   - cached: pread straight into its pinned staging buffer. Staging a mapping of the file through
//     the engine was slower, and so was reading through a small buffer that stays in the processor's
//     cache; the kernel's copy is slower per lane than a lane's copy of a mapping, so a file load
//     takes more lanes (fileReaders; warm/ratio).
//   - not cached: O_DIRECT from a second, read-only descriptor of the file straight into the pinned
//     buffer, which skips the page cache's copy and its readahead, and kept the disk busier than
//     buffered reads. A load of a mostly cold range keeps fewer buffers in use (cold; file.go). A
//     buffered RWF_NOWAIT read as the probe halved the cold rate (it starts readahead of what it
//     misses, read a second time by O_DIRECT).
//
// O_DIRECT turns itself off for the rest of the transfer at the first sign that the file system
// lacks it (EINVAL), and so does a probe the kernel lacks; then uncached pieces go through ReadAt,
// and with no probe every piece counts as cached. Any other io.ReaderAt is read through its ReadAt.
// The O_DIRECT descriptor is opened (through /proc/self/fd) only when the caller's is open for
// reading, so the transfer reads nothing the caller's descriptor could not; writes go through the
// caller's WriteAt alone.
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

// sourceWays sets O_DIRECT and the first probe, for the benchmarks and tests that compare them.
var sourceWays = struct {
	direct   bool
	firstWay int32
}{true, probeCachestat}

// fileOf returns the *os.File behind r, if any, and its descriptor's access mode (O_ACCMODE), asked
// through SyscallConn, which leaves the file as it was (Fd would put a pipe in blocking mode).
func fileOf(r any) (*os.File, int, bool) {
	f, ok := r.(*os.File)
	if !ok || f == nil {
		return nil, 0, false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, 0, false
	}
	var fl int
	var flErr error
	if err := rc.Control(func(fd uintptr) { fl, flErr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || flErr != nil {
		return nil, 0, false
	}
	return f, fl & unix.O_ACCMODE, true
}

// checkReadable refuses (for the call what) an *os.File open for writing only.
func checkReadable(what string, r io.ReaderAt) error {
	if f, mode, ok := fileOf(r); ok && mode == unix.O_WRONLY {
		return fmt.Errorf("%w: %s: %s is open for writing only", ErrFileMode, what, f.Name())
	}
	return nil
}

// checkWritable refuses (for the call what) an *os.File that is not open for writing.
func checkWritable(what string, w io.WriterAt) error {
	if f, mode, ok := fileOf(w); ok && mode == unix.O_RDONLY {
		return fmt.Errorf("%w: %s: %s is open for reading only", ErrFileMode, what, f.Name())
	}
	return nil
}

// openSource prepares the reads of r (checked by checkReadable).
func openSource(r io.ReaderAt) *source {
	s := &source{r: r, fd: -1}
	f, mode, ok := fileOf(r)
	if !ok || mode == unix.O_WRONLY {
		return s
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return s
	}
	s.fd, s.size = int(f.Fd()), fi.Size()
	s.probe.Store(sourceWays.firstWay)
	if !sourceWays.direct {
		return s
	}
	// Reopen through /proc, so that the O_DIRECT flag does not change the caller's descriptor, and
	// the name need not still lead to the file.
	d, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", s.fd), os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return s // tmpfs and others refuse O_DIRECT at open
	}
	s.direct = d
	s.useDirect.Store(true)
	return s
}

func (s *source) close() {
	if s.direct != nil {
		s.direct.Close()
	}
}

// readAt reads n bytes at off into the staging buffer buf (page-aligned, ChunkSize bytes) and
// returns them: a sub-slice of buf, which starts where off lies in its page after O_DIRECT.
func (s *source) readAt(ctx context.Context, buf []byte, off int64, n int) ([]byte, error) {
	start := off &^ (directAlign - 1)
	end := off + int64(n)
	span := (end - start + directAlign - 1) &^ (directAlign - 1)
	if !s.useDirect.Load() || span > int64(len(buf)) || s.inCache(off, end) >= 1 {
		s.cached.Add(int64(n))
		return readFull(ctx, "ReadAt", io.NewSectionReader(s.r, off, int64(n)), buf[:n], off)
	}
	k, err := s.direct.ReadAt(buf[:span], start) // loops until span bytes or the end of the file
	if err == nil || errors.Is(err, io.EOF) {
		if got := start + int64(k); got < end {
			return nil, fmt.Errorf("the file ends at %d, before %d: %w", got, end, io.ErrUnexpectedEOF)
		}
		s.directed.Add(int64(n))
		delta := int(off - start)
		return buf[delta : delta+n], nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return nil, fmt.Errorf("reading at %d: %w", start, err)
	}
	s.useDirect.Store(false) // the file system takes no O_DIRECT here
	return s.readAt(ctx, buf, off, n)
}

// cold reports whether most of [start, end) is read with O_DIRECT: most pages are not in cache.
func (s *source) cold(start, end int64) bool {
	return s.useDirect.Load() && s.inCache(start, end) < 0.5
}

// inCache is the share of [start, end)'s pages in the file that are cached (cachestat, mincore). A
// probe the kernel lacks gives way to the next; with none left, every piece counts as cached.
func (s *source) inCache(start, end int64) float64 {
	pg := int64(os.Getpagesize())
	start &^= pg - 1
	end = min(end, s.size)
	if end <= start {
		return 1
	}
	pages := float64((end - start + pg - 1) / pg)
	for {
		switch s.probe.Load() {
		case probeCachestat:
			var st unix.Cachestat_t
			err := unix.Cachestat(uint(s.fd), &unix.CachestatRange{Off: uint64(start), Len: uint64(end - start)}, &st, 0)
			if err == nil {
				return float64(st.Cache) / pages
			}
			s.probe.CompareAndSwap(probeCachestat, probeMincore) // ENOSYS before Linux 6.5
		case probeMincore:
			if share, err := s.mincoreCached(start, end, pg); err == nil {
				return share
			}
			s.probe.CompareAndSwap(probeMincore, probeNone)
		default:
			return 1
		}
	}
}

// mincoreCached asks mincore which share of the pages of [start, end) (start page-aligned) is
// resident, on a read-only mapping of the range made for the question (it touches no page of it).
func (s *source) mincoreCached(start, end, pg int64) (float64, error) {
	m, err := unix.Mmap(s.fd, start, int(end-start), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(m)
	vec := make([]byte, (int64(len(m))+pg-1)/pg)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(m))), uintptr(len(m)), uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
		return 0, e
	}
	resident := 0
	for _, v := range vec {
		resident += int(v & 1)
	}
	return float64(resident) / float64(len(vec)), nil
}
