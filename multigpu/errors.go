package multigpu

import "errors"

// Sentinel errors of the package. Every error it returns starts with
// "multigpu: " and wraps one of these, or an error of package cuda,
// cudahost, pinpool or transfer (such as cuda.ErrNoDriver, for which
// cuda.IsNoDriver reports true), so that callers can test it with
// errors.Is.
var (
	// ErrInvalidDevices is returned by Open for a device list it cannot
	// serve: empty, with a negative ordinal, with an ordinal twice, or with
	// an ordinal the driver does not show (at least the device count).
	ErrInvalidDevices = errors.New("multigpu: invalid device list")

	// ErrInvalidOptions is returned by Open for options out of range: a
	// negative Budget, or a Transfer template that transfer.New would
	// refuse (transfer.Options.Defaults: a negative ChunkSize, WindowBytes
	// or Lanes, a WindowBytes that holds no chunk, and so on).
	ErrInvalidOptions = errors.New("multigpu: invalid options")

	// ErrNotInSet is returned by Set.Copier and Set.Context for a device
	// that the set was not opened with.
	ErrNotInSet = errors.New("multigpu: device not in the set")

	// ErrClosed is returned by Set.Copier and Set.Context after Close, and
	// by a second Close.
	ErrClosed = errors.New("multigpu: set closed")
)
