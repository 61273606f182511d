package transfer

import (
	"errors"
	"fmt"

	"github.com/pinpool/pinpool/cuda"
)

// Errors of the package. Every error the package returns starts with "transfer: " and wraps one of
// these, the context's error (for a cancelled or timed-out copy), or an error of package cuda or
// pinpool, so that callers can test it with errors.Is.
var (
	// ErrClosed is returned by every use of a Copier after Close, and by a second Close of a Copier
	// or a Registration.
	ErrClosed = errors.New("transfer: copier closed")

	// ErrInvalidOptions is returned by New for a nil pool or context, or options out of range (for
	// example Streams == 1, or a WindowBytes that cannot hold one chunk).
	ErrInvalidOptions = errors.New("transfer: invalid options")

	// ErrCopy wraps a failure of the device to queue or perform a copy; the driver's own error (a
	// *cuda.Error) is wrapped beside it.
	ErrCopy = errors.New("transfer: device copy failed")

	// ErrStaging wraps a failure to get a pinned staging buffer from the pool (other than the
	// context ending, which wraps ctx.Err()).
	ErrStaging = errors.New("transfer: no staging buffer")

	// ErrRegister is returned by Register for memory that cannot be page-locked: empty, not mapped,
	// or refused by the driver.
	ErrRegister = errors.New("transfer: cannot register memory")

	// ErrAlreadyRegistered is returned by Register for memory that overlaps memory already
	// page-locked (by this copier, a pool, or other code); it wraps ErrRegister.
	ErrAlreadyRegistered = fmt.Errorf("%w: memory is already page-locked", ErrRegister)

	// ErrInvalidRange is returned by the stream and file transfers, before anything is allocated or
	// moved, for a negative length or offset, a nil reader, writer or file, an offset plus length
	// that overflows, a device range past its allocation, or a file range past the file's end.
	ErrInvalidRange = errors.New("transfer: invalid range")

	// ErrCallbackPanic is wrapped by the error of a stream or file transfer whose reader or writer
	// panicked: the panic is caught, the transfer ends as after an error, and nothing is held.
	ErrCallbackPanic = errors.New("transfer: reader or writer panicked")

	// ErrContract is wrapped by the error of a stream or file transfer whose reader, writer or file
	// broke its interface's contract: a count below 0 or above its buffer, a short write with no
	// error (beside io.ErrShortWrite), or reads that return nothing again and again (beside
	// io.ErrNoProgress). The bytes of the miscounted call are not moved; the count returned is exact.
	ErrContract = errors.New("transfer: reader or writer broke its contract")

	// ErrFileMode is returned by ToDeviceFromFile for an *os.File not open for reading, and by
	// FromDeviceToFile for one not open for writing, before anything moves: the file is used only
	// through the caller's descriptor and as it allows.
	ErrFileMode = errors.New("transfer: file not open for this transfer")

	// ErrFileChanged is wrapped (beside io.ErrUnexpectedEOF) by the error of ToDeviceFromFile when
	// the file was cut short while it was read.
	ErrFileChanged = errors.New("transfer: file truncated during the transfer")

	// ErrNotMapped is returned by the zero-copy helpers for memory that is not mapped into the
	// device's address space, and for devices that cannot map host memory at all. It is
	// cuda.ErrNotMapped (and pinpool.ErrNotMapped): one sentinel.
	ErrNotMapped = cuda.ErrNotMapped
)
