//go:build !linux

package transfer

import (
	"context"
	"io"
	"os"
)

// source reads the pieces of a file; on this system through its ReadAt only.
type source struct{ r io.ReaderAt }

func openSource(r io.ReaderAt, off, n int64) *source { return &source{r} }

// checkReadable refuses a range past the end of a regular file or of a reader with a Size.
func checkReadable(what string, r io.ReaderAt, off, n int64) error {
	if f, ok := r.(*os.File); ok && f != nil {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			return checkRange(what, off, n, fi.Size())
		}
		return nil
	}
	if s, ok := r.(sized); ok {
		return checkRange(what, off, n, s.Size())
	}
	return nil
}

// checkWritable accepts every writer here: the file's WriteAt reports a descriptor not open for
// writing.
func checkWritable(what string, w io.WriterAt) error { return nil }

// readAt reads n bytes at off into the staging buffer buf and returns them.
func (s *source) readAt(ctx context.Context, buf []byte, off int64, n int) ([]byte, error) {
	if err := readFullAt(ctx, s.r, buf[:n], off); err != nil {
		return nil, err
	}
	return buf[:n], nil
}

func (s *source) close() {}

// mapBytes returns nil: this system's files are read through ReadAt.
func (s *source) mapBytes(lo, hi int64) []byte { return nil }

func (s *source) fileFault(err error) error { return err }
