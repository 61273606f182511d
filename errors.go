package pinpool

import (
	"errors"

	"github.com/pinpool/pinpool/cuda"
)

// Errors returned by the pool. Compare with errors.Is: most are wrapped with
// detail (the size asked, the budget, the backend's own error).
var (
	// ErrClosed is returned by every use of a pool after Close.
	ErrClosed = errors.New("pinpool: pool is closed")
	// ErrBudget is returned by TryGet and Reserve when serving the request
	// would take the pool over Options.Budget, and by Get when ctx ends
	// while it waits for room. ErrLowMemory wraps it.
	ErrBudget = errors.New("pinpool: budget exhausted")
	// ErrLowMemory is returned when growing would take the system's
	// MemAvailable below Options.MinAvailable; errors.Is(err, ErrBudget)
	// holds for it too, and Get waits on it like on the budget.
	ErrLowMemory error
	// ErrInvalidSize is returned for a size <= 0 or above MaxSize.
	ErrInvalidSize = errors.New("pinpool: invalid size")
	// ErrReleased is returned when a Buffer handle is released twice, or
	// used after its release, even if the memory was handed out again.
	ErrReleased = errors.New("pinpool: buffer already released")
	// ErrForeign is returned by Pool.Release for a buffer of another pool.
	ErrForeign = errors.New("pinpool: buffer belongs to another pool")
	// ErrNotMapped is returned by Buffer.DevicePointer when the pool's
	// memory is not mapped into a device's address space.
	// It is cuda.ErrNotMapped: one sentinel for every package.
	ErrNotMapped = cuda.ErrNotMapped
	// ErrInvalidOptions is returned by New for an option out of range or
	// options that contradict each other; the message names the field.
	ErrInvalidOptions = errors.New("pinpool: invalid options")
	// ErrInvalidFence is returned by Buffer.ReleaseAfter for a fence that
	// cannot be called (nil), and wraps the error of a fence whose Done
	// panicked (its buffer is retired, like after a fence error).
	ErrInvalidFence = errors.New("pinpool: invalid fence")
	// ErrGrow wraps a backend's failure to allocate when the pool grows:
	// an error, a panic (with its value), or memory that is short or not
	// page-aligned. The pool never retries in a loop; other sizes keep
	// being served.
	ErrGrow = errors.New("pinpool: backend allocation failed")
)

// ErrLowMemory is set here rather than in its declaration so that the
// package's documentation shows no unexported type.
func init() { ErrLowMemory = lowMemoryError{} }

type lowMemoryError struct{}

func (lowMemoryError) Error() string {
	return "pinpool: growing would take MemAvailable below the floor (Options.MinAvailable)"
}

func (lowMemoryError) Is(target error) bool { return target == ErrBudget }
