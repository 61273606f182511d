package cudahost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/hostmem"
)

// Backend makes pinned host memory for one CUDA device with one Method and
// one set of flags. It has the methods of the pool's backend interface
// (pinpool.Backend) except that Alloc returns the concrete *Chunk; the pool
// wraps it in a small adapter. All methods are safe for concurrent use.
//
// A Backend holds a reference on the device's primary context from New until
// Close has been called and the last Chunk has been freed, whichever comes
// last, so chunks stay freeable after Close.
type Backend struct {
	ctx        *cuda.Context
	props      cuda.Properties
	opt        Options // resolved: Method is HostAlloc or Register
	name       string
	allocFlags cuda.HostAllocFlags
	regFlags   cuda.HostRegisterFlags
	regChunk   int          // RegisterChunk rounded up to the system page size
	splits     atomic.Int64 // registrations refused for their size and retried in smaller parts
	gate       lockGate     // spaces the calls that hold the driver's lock

	// releaseCtx releases the primary context (ctx.Close); tests replace it.
	releaseCtx func() error

	mu     sync.Mutex
	closed bool
	refs   int // 1 until Close, plus one per live chunk and Alloc in progress
}

// New retains the primary context of device opt.Device, checks opt against
// the device's properties, and returns a backend that allocates with the
// chosen method. Errors:
//   - no CUDA driver or device: an error wrapping cuda.ErrNoDriver or
//     cuda.ErrNoDevice (cuda.IsNoDriver reports true), the condition under
//     which callers fall back to host memory;
//   - options that contradict each other: ErrInvalidOptions (checked before
//     the driver is touched);
//   - options the device cannot honour: ErrUnsupported or ErrCannotMap.
func New(opt Options) (*Backend, error) {
	if err := checkOptions(opt); err != nil {
		return nil, err
	}
	ctx, err := cuda.NewContext(opt.Device)
	if err != nil {
		return nil, fmt.Errorf("cudahost: device %d: %w", opt.Device, err)
	}
	props, err := ctx.Device().Properties()
	if err != nil {
		return nil, also(fmt.Errorf("cudahost: device %d: reading properties: %w", opt.Device, err), ctxCloseErr(ctx.Close()))
	}
	resolved, err := validate(opt, props)
	if err != nil {
		return nil, also(err, ctxCloseErr(ctx.Close()))
	}
	return newBackend(ctx, props, resolved, ctx.Close), nil
}

func ctxCloseErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("cudahost: releasing the primary context: %w", err)
}

// newBackend builds a Backend from resolved options.
func newBackend(ctx *cuda.Context, props cuda.Properties, opt Options, release func() error) *Backend {
	b := &Backend{ctx: ctx, props: props, opt: opt, name: opt.name(), releaseCtx: release, refs: 1}
	b.allocFlags, b.regFlags = opt.flags()
	b.gate.pause = opt.RegisterPause
	if opt.RegisterPause == 0 {
		b.gate.pause = DefaultRegisterPause
	}
	if opt.Method == Register {
		page := os.Getpagesize()
		b.regChunk = (opt.RegisterChunk + page - 1) / page * page
	}
	return b
}

// Name describes the backend: "cuda:ORDINAL/METHOD" followed by "+FLAG" for
// each option set, in the order wc, ro, portable, mapped, huge, numaN; for
// example "cuda:0/register" or "cuda:0/hostalloc+wc+mapped".
func (b *Backend) Name() string { return b.name }

// SplitRetries returns how many registrations the driver refused and the
// backend retried in halves (the kernel may cap how much one pin call
// takes), since New.
func (b *Backend) SplitRetries() uint64 { return uint64(b.splits.Load()) }

// GrowLimit is the most bytes a pool should ask of one Alloc: with
// HostAlloc, Options.HostAllocChunk (one cuMemHostAlloc holds the driver's
// lock for its whole length); with Register, zero (no limit: Alloc pins a
// large size in pieces of RegisterChunk bytes itself).
func (b *Backend) GrowLimit() int {
	if b.opt.Method == Register {
		return 0
	}
	if b.opt.HostAllocChunk > 0 {
		return b.opt.HostAllocChunk
	}
	return DefaultHostAllocChunk
}

// Options returns the options the backend runs with: those given to New with
// Method resolved (never Auto) and, for Register, RegisterChunk and
// RegisterGroup set.
func (b *Backend) Options() Options { return b.opt }

// Properties returns the device's properties, read once by New.
func (b *Backend) Properties() cuda.Properties { return b.props }

// Context returns the device's primary context, for callers that need to
// make streams, device memory or copies next to the backend's memory. It is
// valid until Close has been called and every Chunk has been freed.
func (b *Backend) Context() *cuda.Context { return b.ctx }

// Close stops the backend: later Alloc calls fail with ErrClosed. The
// primary context is released now if no Chunk is live, else when the last
// one is freed; chunks still out stay usable and must still be freed. A
// second Close returns ErrClosed.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	b.closed = true
	b.mu.Unlock()
	return b.release()
}

// acquire takes a reference for an allocation, unless the backend is closed.
func (b *Backend) acquire() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("%w: %s: Alloc after Close", ErrClosed, b.name)
	}
	b.refs++
	return nil
}

// release drops a reference; the last one releases the primary context.
func (b *Backend) release() error {
	b.mu.Lock()
	b.refs--
	last := b.refs == 0
	b.mu.Unlock()
	if !last {
		return nil
	}
	return ctxCloseErr(b.releaseCtx())
}

// Alloc returns a new chunk of size bytes of pinned host memory, aligned
// to the system page size (os.Getpagesize). size must be a positive
// multiple of 4096 (ErrInvalidSize otherwise); the driver pins whole
// pages, so where pages are larger (16 or 64 KiB on some arm64 kernels) a
// size that is not a multiple of them pins up to the next page boundary
// (a pinpool.Pool asks only for whole pages). It is slow (a driver call that pins every page, plus mmap and
// prefault for Register) and must be kept off hot paths. On failure nothing
// is left allocated, mapped or registered. After Close it fails with
// ErrClosed. It is AllocContext without a context or progress.
func (b *Backend) Alloc(size int) (*Chunk, error) {
	return b.AllocContext(context.Background(), size, nil)
}

// AllocContext is Alloc that can be cancelled and reports progress. With
// the Register method the chunk is made in pieces of at most
// Options.RegisterChunk bytes: when ctx is done between two pieces, what was
// made is undone and the error wraps ctx's error; progress, if not nil, is
// called after each piece with the bytes pinned so far (rising, never
// concurrently). With HostAlloc the chunk is one driver call: ctx is looked
// at before it, and progress is called once, at the end.
func (b *Backend) AllocContext(ctx context.Context, size int, progress func(pinned int)) (*Chunk, error) {
	if size <= 0 || size%pageUnit != 0 {
		return nil, fmt.Errorf("%w: %d bytes", ErrInvalidSize, size)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cudahost: %s: allocating %d bytes: %w", b.name, size, err)
	}
	if err := b.acquire(); err != nil {
		return nil, err
	}
	var c *Chunk
	var err error
	if b.opt.Method == Register {
		c, err = b.allocRegister(ctx, size, progress)
	} else {
		c, err = b.allocHost(size)
		if err == nil && progress != nil {
			progress(size)
		}
	}
	if err != nil {
		return nil, also(err, b.release())
	}
	return c, nil
}

// allocHost allocates with cuMemHostAlloc.
func (b *Backend) allocHost(size int) (*Chunk, error) {
	m, err := gated(&b.gate, 0, func() (*cuda.HostMem, error) { return b.ctx.HostAlloc(size, b.allocFlags) })
	if err != nil {
		return nil, fmt.Errorf("cudahost: %s: allocating %d bytes: %w", b.name, size, err)
	}
	return b.finish(m.Bytes()[:size:size], []part{gatedPart{m, &b.gate}}, nil)
}

// allocRegister maps size bytes and prefaults and registers them piece by
// piece (pipeline.go).
func (b *Backend) allocRegister(ctx context.Context, size int, progress func(int)) (*Chunk, error) {
	r, err := hostmem.MapLazy(size, hostmem.Options{
		HugePages: !b.opt.SmallPages,
		BindNUMA:  b.opt.BindNUMA,
		NUMANode:  b.opt.NUMANode,
	})
	if err != nil {
		return nil, fmt.Errorf("cudahost: %s: mapping %d bytes: %w", b.name, size, err)
	}
	mem := r.Bytes()
	mem = mem[:cap(mem)]
	align := os.Getpagesize()
	if r.HugePages() && len(mem) >= hugeAlign {
		align = hugeAlign
	}
	pl := b.plan(len(mem), align)
	g, err := pl.run(ctx, r, mem, func(p []byte) (part, error) {
		m, err := gated(&b.gate, len(p), func() (*cuda.HostMem, error) { return b.ctx.HostRegister(p, b.regFlags) })
		if err != nil {
			return nil, err
		}
		return gatedPart{m, &b.gate}, nil
	}, progress)
	if err == nil {
		if err = r.CheckNode(); err != nil {
			err = also(err, freeParts(g.parts, pl.register))
		}
	}
	if err != nil {
		return nil, also(fmt.Errorf("cudahost: %s: %w", b.name, err), unmapErr(r.Unmap()))
	}
	b.splits.Add(int64(g.splits))
	c, err := b.finish(mem[:size:size], g.parts, r)
	if c != nil {
		c.workers = max(pl.register, pl.prefault)
		if size >= hugeReportMin {
			c.hugeBytes, _ = r.HugePageBytes() // 0 when unknown
		}
	}
	return c, err
}

// plan is the pipeline of a Register allocation of size bytes whose
// prefault keeps units of align bytes whole: the options' pieces,
// workers and groups.
func (b *Backend) plan(size, align int) pipeline {
	pl := plan(size, b.regChunk, b.opt.RegisterGroup/b.regChunk, b.opt.PrefaultWorkers, b.opt.RegisterWorkers, align)
	pl.fit = func(left int) int { return b.gate.fit(left, pl.minSplit) }
	return pl
}

// hugeReportMin is the smallest chunk whose huge pages are looked up
// (where the kernel lacks PAGEMAP_SCAN, hostmem reads /proc/self/smaps,
// which costs more than a small growth is worth).
const hugeReportMin = 64 << 20

// hugeAlign is the transparent huge page size the pipeline keeps whole
// (x86-64 and arm64 with 4 KiB pages).
const hugeAlign = 2 << 20

// finish makes the Chunk and, for mapped memory, looks up its device
// pointer; on failure it frees what was made.
func (b *Backend) finish(mem []byte, parts []part, r unmapper) (*Chunk, error) {
	c := &Chunk{b: b, mem: mem, parts: parts, region: r}
	if b.opt.Mapped {
		d, err := devicePointer(parts)
		if err != nil {
			return nil, also(fmt.Errorf("cudahost: %s: %w", b.name, err), c.freeMemory())
		}
		c.dptr, c.mapped = d, true
	}
	return c, nil
}

func unmapErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("cudahost: unmapping: %w", err)
}

// also returns err, joined with cleanup when the cleanup failed too.
func also(err, cleanup error) error {
	if cleanup == nil {
		return err
	}
	return errors.Join(err, cleanup)
}

// NewDefault returns the backend of device 0 that pinpool.DefaultBackend
// uses: New(Options{}), the Auto method (Register, with huge pages, where
// the device supports it). Its errors are New's.
func NewDefault() (*Backend, error) { return NewDefaultDevice(0) }

// NewDefaultDevice is NewDefault for device dev.
func NewDefaultDevice(dev int) (*Backend, error) { return New(Options{Device: dev}) }
