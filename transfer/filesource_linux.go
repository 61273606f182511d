package transfer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// directAlign is the alignment of O_DIRECT reads: offset, length and
// memory, the page size (which covers every logical block size in use).
const directAlign = 4096

// source reads the pieces of a file. For an *os.File it asks the page
// cache first without waiting for the disk (preadv2 with RWF_NOWAIT): a
// cached piece is copied from there; what is not cached is read with
// O_DIRECT from a second descriptor of the file, straight into the pinned
// buffer, skipping the page cache's own copy and its readahead. Each of
// the two ways turns itself off, for the rest of the transfer, at the
// first sign that the kernel or the file system does not have it
// (EOPNOTSUPP, EINVAL); then pieces go through ReadAt.
type source struct {
	r      io.ReaderAt
	fd     int      // the file's descriptor, for RWF_NOWAIT reads; -1: none
	direct *os.File // the same file opened with O_DIRECT; nil: none

	noWait, useDirect atomic.Bool
	cached, directed  atomic.Int64 // bytes read each way (tests, stats)
}

func openSource(r io.ReaderAt) *source {
	s := &source{r: r, fd: -1}
	f, ok := r.(*os.File)
	if !ok {
		return s
	}
	s.fd = int(f.Fd())
	s.noWait.Store(true)
	// Reopen through /proc, so that the O_DIRECT flag does not change the
	// caller's descriptor, and the name need not still lead to the file.
	d, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", s.fd), os.O_RDONLY|unix.O_DIRECT, 0)
	if err == nil {
		s.direct = d
		s.useDirect.Store(true)
	}
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
	if s.fd < 0 || span > int64(len(buf)) {
		return s.plain(buf[:n], off)
	}
	delta := int(off - start)
	out := buf[delta : delta+n]
	pos := off // bytes of [off, end) before pos are in out
	if s.noWait.Load() {
		k, err := unix.Preadv2(s.fd, [][]byte{out}, off, unix.RWF_NOWAIT)
		switch {
		case err == nil:
			pos += int64(k)
			s.cached.Add(int64(k))
			if k == n {
				return out, nil
			}
		case errors.Is(err, unix.EAGAIN):
		default: // EOPNOTSUPP, ENOSYS, EINVAL: no such reads here
			s.noWait.Store(false)
		}
	}
	if pos < end && s.useDirect.Load() {
		at := pos &^ (directAlign - 1)
		b := buf[at-start : span]
		k, err := s.direct.ReadAt(b, at) // loops until len(b) or the end of the file
		if err == nil || errors.Is(err, io.EOF) {
			if got := at + int64(k); got < end {
				return nil, fmt.Errorf("the file ends at %d, before %d: %w", got, end, io.ErrUnexpectedEOF)
			}
			s.directed.Add(end - pos)
			return out, nil
		}
		if !errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("reading at %d: %w", at, err)
		}
		s.useDirect.Store(false) // the file system takes no O_DIRECT here
	}
	if pos < end {
		if _, err := s.plain(out[pos-off:], pos); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// plain reads b at off through the file's ReadAt (the page cache).
func (s *source) plain(b []byte, off int64) ([]byte, error) {
	if err := readFullAt(s.r, b, off); err != nil {
		return nil, err
	}
	return b, nil
}
