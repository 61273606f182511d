package hostmem

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidSize is returned for a size <= 0 or one that overflows when
	// rounded up to whole pages (or to a huge page for alignment).
	ErrInvalidSize = errors.New("hostmem: invalid size")

	// ErrLockLimit is wrapped by the error Alloc returns when mlock fails
	// with ENOMEM, EPERM or EAGAIN: the locked-memory limit
	// (RLIMIT_MEMLOCK, `ulimit -l`) is too low for the request, or the
	// system has no memory left to lock. The wrapping error names the
	// limit, the amount asked for and the amount already locked.
	ErrLockLimit = errors.New("hostmem: cannot lock memory")

	// ErrNUMA is wrapped by the error Map and Alloc return when the region
	// cannot be bound to the requested NUMA node (negative node, node out of
	// range, or mbind refused it). The underlying errno, if any, is wrapped
	// as well.
	ErrNUMA = errors.New("hostmem: cannot bind memory to NUMA node")

	// ErrUnmapped is returned by Region.Unmap when the region was already
	// unmapped.
	ErrUnmapped = errors.New("hostmem: region already unmapped")

	// ErrUnsupported is returned by every constructor on systems other than
	// Linux. It wraps errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("hostmem: locked host memory is implemented on linux only: %w", errors.ErrUnsupported)
)
