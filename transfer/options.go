package transfer

import (
	"fmt"
	"github.com/pinpool/pinpool/cuda"
	"runtime"
	"time"
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

	// Workers is the number of lanes of a staged transfer: goroutines (the
	// calling one among them) that each take whole chunks and copy them
	// between pageable memory and a staging buffer, so CPU copies run in
	// parallel with each other and with the DMA. A transfer of fewer than
	// Workers chunks is cut into smaller ones (down to 256 KiB) so that
	// every lane has work. Zero means min(GOMAXPROCS, DefaultMaxWorkers).
	Workers int

	// LaneSpin is how long each of the copier's standing lanes (Workers-1
	// goroutines that run staged transfers beside the calling goroutine)
	// keeps looking for the next transfer before it sleeps. A sleeping lane
	// takes a thread wake-up to start, about 70 µs on the lent H200 VMs, a
	// third of a 3 MB transfer; transfers that follow each other within
	// LaneSpin start on every lane at once. Spinning costs CPU: up to
	// (Workers-1) × LaneSpin after each staged transfer, though a spinning
	// lane yields its processor to any other goroutine that is ready. Zero
	// means DefaultLaneSpin; negative means never spin.
	LaneSpin time.Duration

	// DirectBelow is the size below which a copy of pageable memory skips
	// staging and goes straight through the driver's synchronous copy
	// (cuMemcpyHtoD/DtoH), since staging costs more than it saves for small
	// copies. Zero means DefaultDirectBelow; negative means never (always
	// stage pageable memory).
	DirectBelow int

	// RegisterChunk is the most bytes one cuMemHostRegister call of
	// Register page-locks: larger regions are registered in parts (single
	// registrations of 512 GiB and more have been seen to fail). It is
	// a positive multiple of 4096, rounded up to the system page size where
	// that is larger. Zero means DefaultRegisterChunk.
	RegisterChunk int64

	// Prewarm makes New reserve the window's staging buffers in the pool
	// (pinpool.Pool.Reserve), so that the first transfers do not wait for
	// the pool to grow (cudaHostAlloc of 64 MiB takes about 32 ms).
	Prewarm bool

	// stores is how host-to-device staging copies write the staging
	// buffers (stagingStores); the zero value is the default, streaming;
	// for benchmarks that compare them.
	stores stagingStores

	// concurrentIssue lets the staged lanes call the driver at the same
	// time (no issueLock); for benchmarks that compare the two.
	concurrentIssue bool

	// noEvict keeps the pieces of small device-to-host transfers in the CPU
	// caches after their bytes are copied out (evictBytes is skipped); for
	// benchmarks.
	noEvict bool

	// coopMax, when non-zero, replaces coopMax (negative: never stage
	// cooperatively), and coopPiece, when positive, replaces coopPiece;
	// for benchmarks.
	coopMax, coopPiece int

	// timeline, when set, records the steps of each staged transfer; for
	// BenchmarkStagedTimeline (one transfer at a time).
	timeline *timeline
}

// stagingStores is a way of writing staging buffers.
type stagingStores int

const (
	// storesAuto, the default, writes the pieces of small (cooperative)
	// transfers with non-temporal stores and the chunks of large ones with
	// cached stores. On the H200 VM the DMA engine read a 3 MB buffer just
	// written by 8 goroutines with ordinary stores at 14.7–17.7 GB/s, and
	// at 48.3 when they wrote it with non-temporal stores (50.5 untouched;
	// BenchmarkStagingDMA): a small transfer's pieces are read by the DMA
	// right after the lanes wrote them, from their private caches. A large
	// transfer's chunks cycle through a 32 MiB window that stays in the
	// last-level cache, where non-temporal stores would add two passes over
	// memory per byte: with them, two GPUs at once staged 56.6 GB/s host to
	// device against 83–85 with cached stores (BenchmarkAllGPUs), though
	// one GPU alone did a little better (64 MiB: 43.2 against 41.3).
	storesAuto stagingStores = iota
	// storesStreaming writes every staging buffer with non-temporal stores.
	storesStreaming
	// storesCached writes every staging buffer with cached stores.
	storesCached
	// storesMemmove is the runtime's copy: cached below 1 MiB a call,
	// non-temporal from there.
	storesMemmove
)

// writeStaging copies src into the staging buffer dst; small tells a
// cooperative transfer's piece from a chunk.
func (o Options) writeStaging(dst, src []byte, small bool) {
	switch {
	case o.stores == storesMemmove:
		copy(dst, src)
	case o.stores == storesStreaming, o.stores == storesAuto && small:
		streamBytes(dst, src)
	default:
		copyBytes(dst, src, true)
	}
}

// Defaults of the zero Options.
const (
	// DefaultStreams is one stream per direction.
	DefaultStreams = 2
	// DefaultChunkSize is 2 MiB. Each of the staged path's lanes copies
	// whole chunks, so small chunks start the DMA early: BenchmarkStagedTuning
	// on the H200 host (2026-11-30, 256 MiB, three runs) staged 42.6–44.7
	// GB/s host to device and 48.5–49.1 device to host with 2 MiB chunks, a
	// 32 MiB window and 8 lanes; 4 MiB chunks, 16 lanes or a 48 MiB window
	// did no better, and the first engine (chunks split among all workers)
	// reached at most 27 and 28.
	DefaultChunkSize = 2 << 20
	// DefaultWindowBytes is 32 MiB of staging in flight: 16 chunks, the
	// window of that measurement.
	DefaultWindowBytes = 32 << 20
	// DefaultMaxWorkers caps the default number of lanes. The CPU copy is
	// the staged path's limit (on the H200 host plain memory copies ran at
	// 6 GB/s on one goroutine, BenchmarkHostCopy); 8 lanes staged as fast
	// as 16 there and leave processors to the application.
	DefaultMaxWorkers = 8
	// DefaultLaneSpin is 200 µs: longer than the gaps within a stream of
	// transfers, so that such a stream keeps its lanes awake, and short
	// enough that an idle copier stops spinning within a fraction of a
	// millisecond.
	DefaultLaneSpin = 200 * time.Microsecond
	// DefaultDirectBelow is 1 MiB. On the 2-GPU H200 host (2026-11-30,
	// BenchmarkStagedVsPageable, the driver's copy timed in the same
	// iterations) the staged path with its cooperative pieces was faster
	// than the driver's own copy from 1 MiB on in both directions in the two
	// runs of the final engine: 1.18–1.19× host to device and 1.08–1.12×
	// device to host at 1 MiB, 1.31–1.49× at 2 MiB; below 512 KiB staging
	// was never more than level with the direct copy (BenchmarkCrossover,
	// earlier engine).
	DefaultDirectBelow = 1 << 20
	// DefaultRegisterChunk is cuda.DefaultRegisterChunk (64 GiB), as for
	// cudahost.
	DefaultRegisterChunk = cuda.DefaultRegisterChunk
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
	if o.LaneSpin == 0 {
		o.LaneSpin = DefaultLaneSpin
	}
	if o.DirectBelow == 0 {
		o.DirectBelow = DefaultDirectBelow
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
	}
	// The same rule as cudahost.Options.RegisterChunk: the default for zero,
	// rounded up to the system page size.
	rc, err := cuda.RegisterChunkSize(o.RegisterChunk)
	if err != nil {
		return o, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	o.RegisterChunk = rc
	return o, nil
}

// slots is the number of staging buffers the window holds.
func (o Options) slots() int { return int(o.WindowBytes / int64(o.ChunkSize)) }
