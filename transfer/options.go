package transfer

import (
	"fmt"
	"os"
	"runtime"
)

// Options configure a Copier. The zero value is ready to use; every zero
// field takes the default named beside it. The defaults come from the
// reference figures measured on an H200 host (PCIe Gen5 x16, see the package
// documentation); re-measure them on the machine at hand with the
// benchmarks of this package.
type Options struct {
	// Streams is the number of CUDA streams the copier owns: half of them
	// (rounded up) carry host-to-device copies and the rest device-to-host
	// copies, so that both copy engines work at once. Chunks of one
	// direction alternate between that direction's streams. Zero means
	// DefaultStreams; 1 is refused (one stream per direction at least).
	Streams int

	// ChunkSize is the size of one pinned staging buffer, the unit in which
	// pageable memory is staged. Zero means DefaultChunkSize.
	ChunkSize int

	// WindowBytes bounds the pinned staging memory in flight, for all
	// transfers of the copier together: a copy waits for a staging buffer
	// once WindowBytes/ChunkSize of them are held (the seed article's
	// "chunked transfer, so that less memory is locked at once"). Zero means
	// DefaultWindowBytes. It must hold at least one chunk; two or more let
	// CPU copies overlap DMA.
	WindowBytes int64

	// Workers is the number of goroutines (the calling one included) that
	// copy between pageable memory and a staging buffer; a chunk is split
	// among them. Zero means min(GOMAXPROCS, DefaultMaxWorkers).
	Workers int

	// DirectBelow is the size below which a copy of pageable memory skips
	// staging and goes straight through the driver's synchronous copy
	// (cuMemcpyHtoD/DtoH), since staging costs more than it saves for small
	// copies. Zero means DefaultDirectBelow; negative means never (always
	// stage pageable memory).
	DirectBelow int

	// RegisterChunk is the most bytes one cuMemHostRegister call of
	// Register page-locks: larger regions are registered in parts (single
	// registrations of 512 GiB and more have been seen to fail). It is
	// rounded up to the system page size. Zero means DefaultRegisterChunk.
	RegisterChunk int64

	// Prewarm makes New reserve the window's staging buffers in the pool
	// (pinpool.Pool.Reserve), so that the first transfers do not wait for
	// the pool to grow (cudaHostAlloc of 64 MiB takes about 32 ms).
	Prewarm bool
}

// Defaults of the zero Options.
const (
	// DefaultStreams is one stream per direction.
	DefaultStreams = 2
	// DefaultChunkSize is 16 MiB: pinned copies reach 55 GB/s from 16 MiB on
	// the H200, and BenchmarkStagedTuning there (2026-11-30) staged 256 MiB
	// fastest with 16 MiB chunks (25 GB/s H2D, 28 GB/s D2H, against 16 and
	// 26 with 4 MiB chunks and 8 workers).
	DefaultChunkSize = 16 << 20
	// DefaultWindowBytes is 256 MiB of staging in flight: 16 chunks, the
	// window of that measurement.
	DefaultWindowBytes = 256 << 20
	// DefaultMaxWorkers caps the default number of copy workers. The CPU
	// copy is the staged path's limit: on the H200 host plain memory copies
	// ran at 5.6 GB/s on one goroutine and 35.6 GB/s on 16
	// (BenchmarkHostCopy), so the default uses every processor up to 16.
	DefaultMaxWorkers = 16
	// DefaultDirectBelow is 2 MiB: BenchmarkCrossover on the H200 host had
	// the driver's direct pageable copy ahead of staging up to 1 MiB (6.9
	// against 6.4 GB/s H2D) and level at 2 MiB (8.1 against 8.3).
	DefaultDirectBelow = 2 << 20
	// DefaultRegisterChunk is 64 GiB, as cudahost.DefaultRegisterChunk.
	DefaultRegisterChunk = 64 << 30
)

// withDefaults fills in zero fields and checks the result.
func (o Options) withDefaults() (Options, error) {
	if o.Streams == 0 {
		o.Streams = DefaultStreams
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.WindowBytes == 0 {
		o.WindowBytes = max(DefaultWindowBytes, int64(o.ChunkSize))
	}
	if o.Workers == 0 {
		o.Workers = min(runtime.GOMAXPROCS(0), DefaultMaxWorkers)
	}
	if o.DirectBelow == 0 {
		o.DirectBelow = DefaultDirectBelow
	}
	if o.RegisterChunk == 0 {
		o.RegisterChunk = DefaultRegisterChunk
	}
	switch {
	case o.Streams < 2:
		return o, fmt.Errorf("%w: Streams = %d (at least 2, one per direction)", ErrInvalidOptions, o.Streams)
	case o.ChunkSize < 0:
		return o, fmt.Errorf("%w: ChunkSize = %d", ErrInvalidOptions, o.ChunkSize)
	case o.WindowBytes < int64(o.ChunkSize):
		return o, fmt.Errorf("%w: WindowBytes = %d holds no chunk of %d bytes", ErrInvalidOptions, o.WindowBytes, o.ChunkSize)
	case o.Workers < 0:
		return o, fmt.Errorf("%w: Workers = %d", ErrInvalidOptions, o.Workers)
	case o.RegisterChunk < 0:
		return o, fmt.Errorf("%w: RegisterChunk = %d", ErrInvalidOptions, o.RegisterChunk)
	}
	page := int64(os.Getpagesize())
	o.RegisterChunk = (o.RegisterChunk + page - 1) / page * page
	return o, nil
}

// slots is the number of staging buffers the window holds.
func (o Options) slots() int { return int(o.WindowBytes / int64(o.ChunkSize)) }
