package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/pinpool/pinpool/cuda"
)

// ToDeviceFromFile copies n bytes of f, from offset off, to the device at dst, and returns how many
// bytes arrived: the pieces complete from the start, all n when the error is nil. Lanes of the
// copier (the direction's own and, where processors are left, the other direction's idle ones;
// for a range mostly not in the page cache, up to four of its own with a piece each in flight) read
// f in parallel at the offsets they need (f.ReadAt must allow that, as *os.File's does), each into
// a pinned staging buffer, while earlier pieces are copied to the device; the pinned memory held
// stays within the copier's windows whatever n is (this direction's, and the free slots of the
// other's, which a download waits for meanwhile).
//
// For an *os.File on Linux (open for reading, else ErrFileMode), a piece in the page cache is read
// from it (pread); one that is not, with O_DIRECT (from a second, read-only descriptor of the same
// file), which skips the page cache's copy; where the file system refuses O_DIRECT (tmpfs, some
// network file systems) or the range is not aligned for it, through the page cache.
//
// A range past the end of the file (for an *os.File, or a reader with a Size method such as
// *bytes.Reader) is refused before anything moves with an error wrapping ErrInvalidRange and
// io.ErrUnexpectedEOF; such a file cut short during the transfer ends it with an error wrapping
// ErrFileChanged and io.ErrUnexpectedEOF, and a reader of no known size that ends early with
// io.ErrUnexpectedEOF. A read error, ctx ending (no further piece is started; the pieces in flight
// complete) or Close end it with an error wrapping theirs; a ReadAt that breaks its contract with
// ErrContract. A nil ctx never ends.
func (c *Copier) ToDeviceFromFile(ctx context.Context, dst cuda.DevicePtr, f io.ReaderAt, off, n int64) (int64, error) {
	checked := false
	if f != nil && n > 0 {
		err := checkReadable("ToDeviceFromFile", f)
		if err == nil {
			checked, err = checkSize("ToDeviceFromFile", f, off, n)
		}
		if err != nil {
			return 0, err
		}
	}
	run, err := c.startStream(ctx, HostToDevice, "ToDeviceFromFile", "file", f == nil, dst, off, n)
	if err != nil || run == nil {
		return 0, err
	}
	src := openSource(f)
	defer src.close()
	readers := c.fileReaders()
	if fileBorrow.cold && src.cold(off, off+n) {
		readers, run.depth = min(c.opt.Lanes, coldReaders), 1 // BenchmarkFileCold, cold-*
	}
	run.move(readers, func(pc piece, buf []byte) ([]byte, error) {
		b, err := src.readAt(run.ctx, buf, pc.off, pc.n)
		if checked && errors.Is(err, io.ErrUnexpectedEOF) {
			// The range was checked against the file's size: the file is shorter now.
			err = fmt.Errorf("%w: %w", ErrFileChanged, err)
		}
		return b, err
	}, nil)
	return run.finish(run.arrived(), fmt.Sprintf("file to device, offset %d", off))
}

// FromDeviceToFile copies n bytes from the device at src into f at offset off, and returns how many
// bytes were written: the pieces complete from the start, all n when the error is nil. Lanes copy
// pieces from the device into pinned staging buffers and write them with f.WriteAt in parallel
// (which *os.File allows); the pinned memory held stays within the copier's window. f is written
// through its own WriteAt only: an *os.File not open for writing is refused with ErrFileMode before
// anything moves. A WriteAt that takes fewer bytes than given with no error, or reports more, ends
// the transfer with ErrContract. Errors and ctx are otherwise as for ToDeviceFromFile. The data is
// in the file's page cache when it returns; call f.Sync to have it on the disk.
func (c *Copier) FromDeviceToFile(ctx context.Context, f io.WriterAt, off int64, src cuda.DevicePtr, n int64) (int64, error) {
	if f != nil && n > 0 {
		if err := checkWritable("FromDeviceToFile", f); err != nil {
			return 0, err
		}
	}
	run, err := c.startStream(ctx, DeviceToHost, "FromDeviceToFile", "file", f == nil, src, off, n)
	if err != nil || run == nil {
		return 0, err
	}
	run.move(c.opt.Lanes, whole, func(pc piece, b []byte) (int, error) {
		if k, err := writeChecked("WriteAt", len(b), func() (int, error) { return f.WriteAt(b, pc.off) }); err != nil {
			return k, fmt.Errorf("writing at %d: %w", pc.off+int64(k), err)
		}
		return len(b), nil
	})
	return run.finish(run.arrived(), fmt.Sprintf("device to file, offset %d", off))
}

// fileReaders is how many lanes read a file's pieces at once: the direction's own and, up to
// GOMAXPROCS, the other direction's (move borrows its window too). A pread copies the page cache
// slower than a lane copies a mapping of it, so a file needs more lanes and staging to keep up
// (BenchmarkFileToDevice, warm/ratio/own-lanes and warm/ratio/lanes-only).
func (c *Copier) fileReaders() int {
	if !fileBorrow.lanes {
		return c.opt.Lanes
	}
	return max(c.opt.Lanes, min(2*c.opt.Lanes-1, runtime.GOMAXPROCS(0)))
}

// fileBorrow is off only in the benchmarks that measure it, and so is the cold rule: a disk read by
// four O_DIRECT pieces at a time (coldReaders, one a lane) beat two, eight or more buffers in use.
var fileBorrow, coldReaders = struct{ lanes, window, cold bool }{true, true, true}, 4

// sized is a reader that knows its size, as *bytes.Reader and *io.SectionReader do.
type sized interface{ Size() int64 }

// checkSize refuses (for the call what) [off, off+n) of r past the end of a regular file or of a
// reader with a Size, and reports whether r had a size to check the range against.
func checkSize(what string, r io.ReaderAt, off, n int64) (bool, error) {
	size := int64(-1)
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
	} else if s, ok := r.(sized); ok {
		size = s.Size()
	}
	switch {
	case size < 0:
		return false, nil
	case off > size || n > size-off:
		return false, fmt.Errorf("%w: %s: %d bytes at offset %d of a file of %d: %w", ErrInvalidRange, what, n, off, size, io.ErrUnexpectedEOF)
	}
	return true, nil
}
