package transfer

import "github.com/pinpool/pinpool/cuda"

// Direction is the direction of a copy.
type Direction int

// Directions.
const (
	HostToDevice Direction = iota // host memory to the device (H2D)
	DeviceToHost                  // device memory to host memory (D2H)
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
// most of its bytes. Memory that begins page-locked and runs past its allocation's end is staged.
type Path int

// Paths, from the cheapest setup to the most work per byte.
const (
	PathDirect     Path = iota // the driver's synchronous copy of pageable memory below DirectBelow
	PathStaged                 // pageable memory through pinned staging, CPU copies overlapping DMA
	PathPinned                 // one asynchronous copy of memory already page-locked
	PathRegistered             // asynchronous copies of memory registered with Copier.Register
	PathStream                 // a stream or file transfer, counted as one transfer of all its bytes
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
