package transfer

import "github.com/pinpool/pinpool/cuda"

// Direction is the direction of a copy.
type Direction int

// Directions.
const (
	// HostToDevice copies host memory to the device (H2D).
	HostToDevice Direction = iota
	// DeviceToHost copies device memory to host memory (D2H).
	DeviceToHost
)

// String returns "H2D" or "D2H".
func (d Direction) String() string {
	if d == DeviceToHost {
		return "D2H"
	}
	return "H2D"
}

// Path is the way a copy moves its bytes (the package documentation describes each). A copy whose
// host memory is of several kinds moves each part its own way; it is counted under the path of
// most of its bytes.
type Path int

// Paths, from the cheapest setup to the most work per byte.
const (
	// PathDirect is the driver's synchronous copy of pageable parts below Options.DirectBelow.
	PathDirect Path = iota
	// PathStaged copies pageable memory through pooled pinned staging buffers, CPU copies
	// overlapping DMA; so is memory that begins page-locked and runs past its allocation's end.
	PathStaged
	// PathPinned is one asynchronous copy of memory already page-locked (a pool buffer, or memory
	// cuda.IsPinned accepts).
	PathPinned
	// PathRegistered is asynchronous copies of memory registered with Copier.Register, split at
	// the boundaries of the registrations and registered parts a copy covers.
	PathRegistered
	// PathStream is a stream or file transfer, read or written straight into pinned staging; Stats
	// counts each such call as one transfer of all its bytes.
	PathStream
	numPaths
)

// String returns "direct", "staged", "pinned", "registered" or "stream".
func (p Path) String() string {
	if p < 0 || p >= numPaths {
		return "unknown"
	}
	return [...]string{"direct", "staged", "pinned", "registered", "stream"}[p]
}

// op is one transfer: its direction, device address and host memory.
type op struct {
	dir  Direction
	dev  cuda.DevicePtr
	host []byte
}

// segment is a range [off, end) of a transfer's host memory held by one kind of memory, with the
// path it takes. A registered or pinned segment lies inside one registration or allocation, as an
// asynchronous copy must.
type segment struct {
	off, end int
	path     Path
}
