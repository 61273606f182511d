//go:build !linux

package transfer

import (
	"context"
	"io"
)

// source reads the pieces of a file; on this system through its ReadAt only.
type source struct{ r io.ReaderAt }

func openSource(r io.ReaderAt) *source { return &source{r} }

func (s *source) close() {}

// cold reports false: there is no O_DIRECT here.
func (s *source) cold(start, end int64) bool { return false }

// checkReadable accepts every reader here: ReadAt reports a descriptor not open for reading.
func checkReadable(what string, r io.ReaderAt) error { return nil }

// checkWritable accepts every writer here: WriteAt reports a descriptor not open for writing.
func checkWritable(what string, w io.WriterAt) error { return nil }

func (s *source) readAt(ctx context.Context, buf []byte, off int64, n int) ([]byte, error) {
	return readFull(ctx, "ReadAt", io.NewSectionReader(s.r, off, int64(n)), buf[:n], off)
}
