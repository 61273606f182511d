package transfer

import (
	"fmt"
	"runtime"
	"time"

	"github.com/pinpool/pinpool/cuda"
)

// Options configure a Copier. The zero value is ready to use: every zero field takes the default
// named beside it (Defaults fills them in as New does).
type Options struct {
	// Streams is the number of CUDA streams the copier owns: half of them (rounded up) carry
	// host-to-device copies and the rest device-to-host copies, so that both copy engines work at
	// once. Zero means DefaultStreams; 1 is refused (one stream per direction at least).
	Streams int

	// ChunkSize is the size of one pinned staging buffer. Pageable memory is staged in chunks of at
	// most this size, each one asynchronous copy. Zero means DefaultChunkSize.
	ChunkSize int

	// WindowBytes bounds the pinned staging held by the copier's transfers in one direction
	// (WindowBytes/ChunkSize buffers; a transfer waits for one beyond that); each direction, on its
	// own copy engine, has its own window. It must hold one chunk; two or more let CPU copies
	// overlap DMA. A file load (ToDeviceFromFile) also takes the download window's free slots, so
	// the copier never holds more than twice WindowBytes. Zero means DefaultWindowBytes.
	WindowBytes int64

	// Lanes is the most goroutines that work on one staged transfer: the caller and up to Lanes-1
	// standing lanes of the copier, which copy between pageable memory and staging in parallel with
	// each other and with the DMA. Each direction has Lanes-1 standing lanes, shared among its
	// transfers at once. 1 stages on the caller alone. A transfer within the window that finds the
	// lanes asleep (more than LaneSpin after the one before) takes three of them at most, four
	// downloading: lanes that wake late find little left to copy. Zero means min(GOMAXPROCS, DefaultMaxLanes).
	Lanes int

	// LaneSpin is how long a standing lane keeps looking for the next staged transfer before it
	// sleeps, after a transfer that came within LaneSpin of the one before it in its direction (or
	// overlapped it). A sleeping lane takes a thread wake-up to start; spinning lanes burn up to
	// (Lanes-1) × LaneSpin of CPU time after such a transfer; transfers further apart, such as a
	// paced stream of frames, pay no spin. Zero means DefaultLaneSpin; negative means never spin.
	LaneSpin time.Duration

	// DirectBelow is the size below which a copy of pageable memory goes through the driver's
	// synchronous copy, since for small copies staging costs more than it saves. Zero means
	// DefaultDirectBelow; negative means never (always stage pageable memory).
	DirectBelow int

	// RegisterChunk is the most bytes one cuMemHostRegister call of Register page-locks: larger
	// regions are registered in parts, since very large single registrations fail. A positive
	// multiple of 4096, rounded up to the system page size; zero means DefaultRegisterChunk.
	RegisterChunk int64

	// Prewarm makes New reserve one window's staging buffers in the pool (pinpool.Pool.Reserve), so
	// that the first transfers do not wait for the pool to allocate pinned memory.
	Prewarm bool
}

// Defaults of the zero Options, measured by BenchmarkStagedTuning, BenchmarkFrameStream and
// BenchmarkPacedFrames.
const (
	DefaultStreams       = 2                         // one stream per direction
	DefaultRegisterChunk = cuda.DefaultRegisterChunk // as for cudahost
	// DefaultChunkSize is 2 MiB: small enough that the DMA of a large transfer starts early and
	// each lane holds several chunks in flight, large enough that the copy engine's pause between
	// copies costs little; 4 MiB chunks made the lanes' copies slower (BenchmarkStagedTuning).
	DefaultChunkSize = 2 << 20
	// DefaultWindowBytes is 32 MiB: 16 chunks, two in flight for each of 8 lanes, and small enough
	// to stay in the last-level cache, where the DMA reads it fastest.
	DefaultWindowBytes = 32 << 20
	// DefaultMaxLanes caps the default number of lanes: the CPU copy is the staged path's limit,
	// and more than 8 lanes staged no faster while taking processors from the application.
	DefaultMaxLanes = 8
	// DefaultLaneSpin is 200 µs: longer than the gaps of a back-to-back stream, which keeps its
	// lanes awake, and shorter than the period of a paced stream of frames at 300 frames a second,
	// which pays no spin (BenchmarkFrameStream, BenchmarkPacedFrames).
	DefaultLaneSpin = 200 * time.Microsecond
	// DefaultDirectBelow is 1 MiB: from there on staging beat the driver's own copy of pageable
	// memory both ways; a transfer after a pause, whose lanes must wake, is level with it there.
	DefaultDirectBelow = 1 << 20
)

// Defaults returns o with every zero field set to its default, as New applies them, or an error
// wrapping ErrInvalidOptions for a field out of range. Lanes defaults from the GOMAXPROCS of the
// moment.
func (o Options) Defaults() (Options, error) {
	orDefault(&o.Streams, DefaultStreams)
	orDefault(&o.ChunkSize, DefaultChunkSize)
	orDefault(&o.WindowBytes, max(DefaultWindowBytes, int64(o.ChunkSize)))
	orDefault(&o.Lanes, min(runtime.GOMAXPROCS(0), DefaultMaxLanes))
	orDefault(&o.LaneSpin, DefaultLaneSpin)
	orDefault(&o.DirectBelow, DefaultDirectBelow)
	switch {
	case o.Streams < 2:
		return o, fmt.Errorf("%w: Streams = %d (at least 2, one per direction)", ErrInvalidOptions, o.Streams)
	case o.ChunkSize < 0:
		return o, fmt.Errorf("%w: ChunkSize = %d", ErrInvalidOptions, o.ChunkSize)
	case o.WindowBytes < int64(o.ChunkSize):
		return o, fmt.Errorf("%w: WindowBytes = %d holds no chunk of %d bytes", ErrInvalidOptions, o.WindowBytes, o.ChunkSize)
	case o.Lanes < 0:
		return o, fmt.Errorf("%w: Lanes = %d", ErrInvalidOptions, o.Lanes)
	}
	rc, err := cuda.RegisterChunkSize(o.RegisterChunk) // cudahost.Options.RegisterChunk's rule
	if err != nil {
		return o, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	o.RegisterChunk = rc
	return o, nil
}

// Slots is WindowBytes/ChunkSize: the staging buffers a pool must give one direction at once.
func (o Options) Slots() int { return int(o.WindowBytes / int64(max(o.ChunkSize, 1))) }

// orDefault sets *v to d where it is zero.
func orDefault[T comparable](v *T, d T) {
	if *v == *new(T) {
		*v = d
	}
}
