package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/pinpool/pinpool/cuda"
)

// ToDeviceFromFile copies n bytes of f, from offset off, to the device at
// dst, and returns how many bytes arrived: the pieces complete from the
// start, all n when the error is nil. Several lanes read f in parallel at
// the offsets they need (f.ReadAt must allow that, as *os.File's does),
// each straight into a pinned staging buffer, while earlier pieces are
// copied to the device; the pinned memory held stays within the copier's
// window whatever n is.
//
// For an *os.File on Linux, a piece that is in the page cache is read from
// it, and one that is not is read with O_DIRECT into the page-aligned
// buffer (from a second descriptor of the same file), which skips the
// page cache's copy; where the file system refuses O_DIRECT (tmpfs, some
// network file systems) or the range is not aligned for it, the piece is
// read through the page cache.
//
// A file shorter than off+n ends the transfer with an error wrapping
// io.ErrUnexpectedEOF; a read error, ctx ending (no further piece is
// started; the pieces in flight complete) or Close end it with an error
// wrapping theirs. A nil ctx never ends.
func (c *Copier) ToDeviceFromFile(ctx context.Context, dst cuda.DevicePtr, f io.ReaderAt, off, n int64) (int64, error) {
	ctx, ps, p, err := c.startStream(ctx, "ToDeviceFromFile", "file", f == nil, off, n)
	if err != nil || ps == nil {
		return 0, err
	}
	defer c.end()
	src := openSource(f)
	defer src.close()
	c.stagedLanes(ctx, HostToDevice, ps, p, func(pc piece, buf []byte) error {
		data, err := src.readAt(buf, pc.off, pc.n)
		if err != nil {
			return err
		}
		return c.copyPiece(ctx, HostToDevice, dst+cuda.DevicePtr(pc.pos), data)
	})
	return p.result(fmt.Sprintf("file to device, offset %d", off), n)
}

// FromDeviceToFile copies n bytes from the device at src into f at offset
// off, and returns how many bytes were written: the pieces complete from
// the start, all n when the error is nil. Lanes copy pieces from the
// device into pinned staging buffers and write them with f.WriteAt in
// parallel (which *os.File allows); the pinned memory held stays within
// the copier's window. Errors and ctx are as for ToDeviceFromFile. The
// data is in the file's page cache when it returns; call f.Sync to have
// it on the disk.
func (c *Copier) FromDeviceToFile(ctx context.Context, f io.WriterAt, off int64, src cuda.DevicePtr, n int64) (int64, error) {
	ctx, ps, p, err := c.startStream(ctx, "FromDeviceToFile", "file", f == nil, off, n)
	if err != nil || ps == nil {
		return 0, err
	}
	defer c.end()
	c.stagedLanes(ctx, DeviceToHost, ps, p, func(pc piece, buf []byte) error {
		b := buf[:pc.n]
		if err := c.copyPiece(ctx, DeviceToHost, src+cuda.DevicePtr(pc.pos), b); err != nil {
			return err
		}
		if _, err := caught("WriteAt", func() (int, error) { return f.WriteAt(b, pc.off) }); err != nil {
			return fmt.Errorf("writing at %d: %w", pc.off, err)
		}
		return nil
	})
	return p.result(fmt.Sprintf("device to file, offset %d", off), n)
}

// readFullAt reads len(b) bytes of r at off; a short file is an error
// wrapping io.ErrUnexpectedEOF that says where it ended.
func readFullAt(r io.ReaderAt, b []byte, off int64) error {
	k, err := caught("ReadAt", func() (int, error) { return r.ReadAt(b, off) })
	if k == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("the file ends at %d, before %d: %w", off+int64(k), off+int64(len(b)), io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("reading at %d: %w", off+int64(k), err)
}
