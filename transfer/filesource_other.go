//go:build !linux

package transfer

import "io"

// source reads the pieces of a file; on this system through its ReadAt
// only.
type source struct{ r io.ReaderAt }

func openSource(r io.ReaderAt) *source { return &source{r} }

// readAt reads n bytes at off into the staging buffer buf and returns them.
func (s *source) readAt(buf []byte, off int64, n int) ([]byte, error) {
	if err := readFullAt(s.r, buf[:n], off); err != nil {
		return nil, err
	}
	return buf[:n], nil
}

func (s *source) close() {}
