package cudahost

import "errors"

// Sentinel errors of the package. Every error it returns starts with
// "cudahost: " and wraps one of these, or an error of package cuda or
// hostmem (such as cuda.ErrNoDriver or cuda.ErrOutOfMemory), so that callers
// can test it with errors.Is.
var (
	// ErrInvalidSize is returned by Alloc for a size that is not a positive
	// multiple of 4096.
	ErrInvalidSize = errors.New("cudahost: size must be a positive multiple of 4096")

	// ErrInvalidOptions is returned by New for options that contradict each
	// other or are out of range, whatever the device: WriteCombined with the
	// Register method, ReadOnly, HugePages, SmallPages or BindNUMA with the
	// HostAlloc method, HugePages with SmallPages, an unknown Method, a
	// negative Device or NUMANode, a RegisterChunk that is negative, not a
	// multiple of 4096 or above MaxRegisterChunk, a RegisterGroup or a
	// HostAllocChunk that is negative or not a multiple of 4096.
	ErrInvalidOptions = errors.New("cudahost: invalid options")

	// ErrUnsupported is returned by New when the device cannot do what the
	// options ask: the Register method without host-register support
	// (integrated GPUs below compute capability 7.2, such as the Jetson TX2),
	// or ReadOnly without read-only registration support.
	ErrUnsupported = errors.New("cudahost: not supported by this device")

	// ErrCannotMap is returned by New when Mapped is set and the device
	// cannot map host memory into its address space (CanMapHostMemory is
	// false), and by Alloc when the parts of a registered allocation map to
	// device addresses that are not contiguous.
	ErrCannotMap = errors.New("cudahost: cannot map host memory into the device address space")

	// ErrClosed is returned by Alloc after Close, and by a second Close.
	ErrClosed = errors.New("cudahost: backend closed")

	// ErrFreed is returned by a second Free of a Chunk, and by DevicePointer
	// after Free.
	ErrFreed = errors.New("cudahost: chunk already freed")
)
