package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/pinpool/pinpool/cuda"
)

// ToDeviceFrom copies n bytes read from r to the device at dst, and returns how many bytes arrived
// there: all n when the error is nil. The calling goroutine reads r in order, each piece of at most
// ChunkSize bytes straight into a pinned staging buffer, while the pieces read before are copied
// to the device; the pinned memory held stays within the copier's window whatever n is, and none is
// held after it returns.
//
// A reader that ends before n bytes ends the transfer with an error wrapping io.ErrUnexpectedEOF
// (what it gave is copied); a reader's error, ctx ending (no further piece is read; those in flight
// complete) or Close end it with an error wrapping theirs. A reader that breaks io.Reader's
// contract (a count below 0 or above the buffer it was given, or many empty reads in a row) ends it
// with an error wrapping ErrContract: the bytes of the read it miscounted are not copied. A panic
// in r ends it with ErrCallbackPanic. n must fit the device allocation at dst (ErrInvalidRange,
// before anything is read). A nil ctx never ends; ctx is checked between reads, but a Read that
// never returns is waited for, since the staging buffer it was given is its until it does. For a
// file, ToDeviceFromFile reads in parallel and is faster.
func (c *Copier) ToDeviceFrom(ctx context.Context, dst cuda.DevicePtr, r io.Reader, n int64) (int64, error) {
	run, err := c.startStream(ctx, HostToDevice, "ToDeviceFrom", "reader", r == nil, dst, 0, n)
	if err != nil || run == nil {
		return 0, err
	}
	run.move(1, func(pc piece, buf []byte) ([]byte, error) {
		return readFull(run.ctx, "Read", r, buf[:pc.n:pc.n], pc.pos)
	}, nil)
	return run.finish(run.arrived(), "reader to device")
}

// readFull fills b from r (readChecked) and returns what it read: all of b, or with an error what
// came before it; a reader that ends early is an error wrapping io.ErrUnexpectedEOF. at is where b
// starts in the data, what names r's method, for the errors.
func readFull(ctx context.Context, what string, r io.Reader, b []byte, at int64) ([]byte, error) {
	k, err := readChecked(ctx, what, r, b)
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		err = fmt.Errorf("the data ends at %d, before %d: %w", at+int64(k), at+int64(len(b)), io.ErrUnexpectedEOF)
	default:
		err = fmt.Errorf("reading at %d: %w", at+int64(k), err)
	}
	return b[:k], err
}

// emptyReads is how many reads in a row may return no byte and no error before a transfer gives up
// with io.ErrNoProgress: as many as the standard library's bufio allows.
const emptyReads = 100

// readChecked fills b from r, as io.ReadFull, and returns how many bytes of b hold what r gave. It
// trusts no count: one below 0 or above what was asked ends it with ErrContract, without the bytes
// of that read; a run of empty reads ends it with ErrContract and io.ErrNoProgress; ctx ending
// between reads ends it with ctx's error; a panic in r with ErrCallbackPanic. what names the
// caller's method in its errors.
func readChecked(ctx context.Context, what string, r io.Reader, b []byte) (int, error) {
	k, empty := 0, 0
	for k < len(b) {
		if err := ctx.Err(); err != nil {
			return k, err
		}
		want := len(b) - k
		m, err := caught(what, func() (int, error) { return r.Read(b[k:]) })
		if m < 0 || m > want {
			return k, fmt.Errorf("%w: %s of %d bytes returned %d", ErrContract, what, want, m)
		}
		k += m
		switch {
		case err == io.EOF && k == len(b):
			return k, nil
		case err != nil:
			return k, err
		case m == 0:
			if empty++; empty >= emptyReads {
				return k, fmt.Errorf("%w: %d %s calls in a row returned no byte and no error: %w", ErrContract, empty, what, io.ErrNoProgress)
			}
		default:
			empty = 0
		}
	}
	return k, nil
}

// writeChecked calls write, the caller's Write or WriteAt (what) of n bytes, and returns how many
// it took: a count below 0 or above n is ErrContract (and counts as none), a short write with no
// error wraps io.ErrShortWrite and ErrContract, a panic is ErrCallbackPanic.
func writeChecked(what string, n int, write func() (int, error)) (int, error) {
	m, err := caught(what, write)
	switch {
	case m < 0 || m > n:
		return 0, fmt.Errorf("%w: %s of %d bytes returned %d", ErrContract, what, n, m)
	case err != nil:
		return m, err
	case m < n:
		return m, fmt.Errorf("%w: %s took %d of %d bytes with no error: %w", ErrContract, what, m, n, io.ErrShortWrite)
	}
	return m, nil
}

// whole is the fill of a download's pieces: the piece's bytes of its staging buffer.
func whole(pc piece, buf []byte) ([]byte, error) { return buf[:pc.n:pc.n], nil }

// FromDeviceTo copies n bytes from the device at src to w, in order, and returns how many bytes w
// took: all n when the error is nil, and exactly what the writer accepted otherwise. Pieces of at
// most ChunkSize bytes are copied from the device into pinned staging buffers ahead of the calling
// goroutine, which writes them to w; the pinned memory held stays within the copier's window, and
// none is held after it returns. A write error, ctx ending or Close end the transfer with an error
// wrapping theirs; a writer that breaks io.Writer's contract (a short write with no error, a count
// below 0 or above what it was given) with ErrContract; a panic in w with ErrCallbackPanic. n must
// fit the device allocation at src (ErrInvalidRange). A nil ctx never ends; a Write that never
// returns is waited for, as in ToDeviceFrom.
func (c *Copier) FromDeviceTo(ctx context.Context, w io.Writer, src cuda.DevicePtr, n int64) (int64, error) {
	run, err := c.startStream(ctx, DeviceToHost, "FromDeviceTo", "writer", w == nil, src, 0, n)
	if err != nil || run == nil {
		return 0, err
	}
	// The writer is called on one goroutine, in order, as each piece lands, so the count of what it
	// took is exact, whatever ends the transfer meanwhile.
	var written int64
	run.move(1, whole, func(pc piece, b []byte) (int, error) {
		k, err := writeChecked("Write", len(b), func() (int, error) { return w.Write(b) })
		written += int64(k)
		if err != nil {
			return k, fmt.Errorf("writing after %d bytes: %w", written, err)
		}
		return k, nil
	})
	return run.finish(written, "device to writer")
}
