package transfer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
)

// Copier moves bytes between host memory and one device. It owns streams (half per direction), per
// direction a window of pinned staging buffers from a pool and Lanes-1 standing lanes, and the
// registrations made with Register. All methods are safe for concurrent use.
type Copier struct {
	// The lock order: a goroutine holding one of these takes only locks further down, and waits for
	// nothing while it holds any, except where noted:
	//
	//	mu (write: Close only)     guards closed; Close waits for inflight after releasing it
	//	issuing[d] (issueLock)     held around a chunk's driver calls by one goroutine at a
	//	                           time; under it: events.mu, runState.mu
	//	regs.mu                    held alone, never while copying
	//	runState.mu, events.mu, chunkedRun.shareMu   leaves: nothing is taken under them
	// The window and the pool are taken with no lock of the package held.

	pool *pinpool.Pool
	dev  device
	opt  Options
	tune tuning

	streams []stream         // the first half (rounded up) host to device, the rest device to host
	rr      [2]atomic.Uint32 // round robin over each direction's streams

	wins     [2]*window        // per direction (below)
	held     heldSlots         // the slots held in both windows
	lanes    [2]*standingLanes // per direction (lanes.go)
	issuing  [2]issueLock      // per direction: the staged lanes' driver calls
	events   events
	regs     registry
	stats    counters
	pageable pageableSeen

	mu       sync.RWMutex // closed, and Add on inflight
	closed   bool
	inflight sync.WaitGroup
}

// New makes a copier for the device of ctx that stages through pinned buffers of pool, which must
// be pinned for ctx's device: a pool over pinpool.CUDABackend(b) where b.Context() == ctx (a pool
// over memory locked with mlock only is refused by the driver at the first staged copy, with
// cuda.ErrNotPinned). The pool and the context must outlive the copier.
func New(pool *pinpool.Pool, ctx *cuda.Context, opt Options) (*Copier, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil cuda.Context", ErrInvalidOptions)
	}
	return newCopier(pool, cudaDevice{ctx}, opt, defaultTuning())
}

// newCopier makes a copier over any device (the fake one in tests) with tuning t.
func newCopier(pool *pinpool.Pool, dev device, opt Options, t tuning) (*Copier, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrInvalidOptions)
	}
	o, err := opt.Defaults()
	if err != nil {
		return nil, err
	}
	if o.Prewarm {
		if err := pool.Reserve(o.ChunkSize, o.Slots()); err != nil {
			return nil, fmt.Errorf("%w: prewarming %d buffers of %d bytes: %w", ErrStaging, o.Slots(), o.ChunkSize, err)
		}
	}
	c := &Copier{pool: pool, dev: dev, opt: o, tune: t, events: events{dev: dev}}
	c.regs.chunk = int(o.RegisterChunk)
	for range o.Streams {
		s, err := dev.newStream()
		if err != nil {
			for _, s := range c.streams {
				s.destroy()
			}
			return nil, fmt.Errorf("transfer: creating stream %d of %d: %w", len(c.streams)+1, o.Streams, err)
		}
		c.streams = append(c.streams, s)
	}
	for d := range 2 {
		c.wins[d] = &window{tokens: make(chan struct{}, o.Slots()), held: &c.held}
		c.lanes[d] = newStandingLanes(o.Lanes-1, o.LaneSpin)
	}
	return c, nil
}

// Options returns the options the copier runs with, defaults filled in.
func (c *Copier) Options() Options { return c.opt }

// begin registers an operation in flight, unless the copier is closed.
func (c *Copier) begin() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	c.inflight.Add(1)
	return nil
}

func (c *Copier) end() { c.inflight.Done() }

// stream returns the next stream of direction d, round robin.
func (c *Copier) stream(d Direction) stream {
	half := (len(c.streams) + 1) / 2
	ss := c.streams[:half]
	if d == DeviceToHost {
		ss = c.streams[half:]
	}
	if len(ss) == 1 { // the default: no shared counter to bump for every chunk
		return ss[0]
	}
	return ss[int(c.rr[d].Add(1))%len(ss)]
}

// Register page-locks b, in parts of at most Options.RegisterChunk bytes on page boundaries (see
// cuda.RegisterInParts), so that copies of b's bytes go directly to and from the device until the
// Registration is closed. b must stay allocated until then (a Go slice is kept referenced; an
// mmap'd region must not be unmapped). If a part fails, the parts registered are unregistered and
// the error names the part. Errors wrap ErrRegister: for empty memory, memory the driver refuses,
// and, as ErrAlreadyRegistered, memory that overlaps a registration of this copier or memory
// already page-locked (a pool buffer). Copies are split at the boundaries of the parts and
// registrations they cover, which the driver requires; memory registered by other code is not known
// to the copier and must not be copied across its registrations' boundaries.
func (c *Copier) Register(b []byte) (*Registration, error) {
	if err := c.begin(); err != nil {
		return nil, err
	}
	defer c.end()
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty memory", ErrRegister)
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	r := &Registration{g: &c.regs, mem: b, start: start, end: start + uintptr(len(b))}
	c.regs.mu.RLock()
	overlaps := c.regs.overlaps(r.start, r.end)
	c.regs.mu.RUnlock()
	if overlaps {
		return nil, fmt.Errorf("%w: %d bytes at %#x overlap a registration of this copier", ErrAlreadyRegistered, len(b), start)
	}
	if c.dev.isPinned(b[:1]) || c.dev.isPinned(b[len(b)-1:]) {
		return nil, fmt.Errorf("%w: %d bytes at %#x are page-locked already", ErrAlreadyRegistered, len(b), start)
	}
	kind := ErrRegister
	parts, err := cuda.RegisterInParts(b, c.regs.chunk, func(p []byte) (regPart, error) {
		h, err := c.dev.register(p)
		if err != nil {
			if errors.Is(err, cuda.ErrAlreadyRegistered) {
				kind = ErrAlreadyRegistered
			}
			return regPart{}, err
		}
		s := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
		return regPart{start: s, end: s + uintptr(len(p)), h: h}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", kind, err)
	}
	r.parts = parts
	if !c.regs.insert(r) {
		err := fmt.Errorf("%w: %d bytes at %#x were registered meanwhile", ErrAlreadyRegistered, len(b), start)
		return nil, errors.Join(err, r.free())
	}
	return r, nil
}

// Close waits for the transfers in flight (asynchronous ones included), unregisters the
// registrations still open, and destroys the streams and events. Staging buffers are all back in
// the pool (or pending on fences that have completed) when it returns; the pool itself is not
// closed. Later calls return ErrClosed, as does a second Close.
func (c *Copier) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	c.mu.Unlock()
	c.inflight.Wait()
	for _, l := range c.lanes {
		l.stop()
	}
	errs := []error{c.regs.closeAll()}
	for _, s := range c.streams {
		errs = append(errs, s.synchronize(), s.destroy())
	}
	if err := errors.Join(append(errs, c.events.close())...); err != nil {
		return fmt.Errorf("transfer: closing: %w", err)
	}
	return nil
}

// Stats returns a snapshot of the copier's counters. It is cheap and safe to call at any time, also
// after Close.
func (c *Copier) Stats() Stats {
	s := &c.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := func(d Direction) DirectionStats {
		p := &s.path[d]
		return DirectionStats{Direct: p[PathDirect], Staged: p[PathStaged], Pinned: p[PathPinned], Registered: p[PathRegistered], Stream: p[PathStream]}
	}
	return Stats{
		ToDevice:        dir(HostToDevice),
		FromDevice:      dir(DeviceToHost),
		Chunks:          s.chunks.Load(),
		StagingWaits:    c.wins[0].waits.Load() + c.wins[1].waits.Load(),
		StagingWaitTime: time.Duration(c.wins[0].waitNanos.Load() + c.wins[1].waitNanos.Load()),
		StagingBytes:    c.held.now.Load() * int64(c.opt.ChunkSize),
		PeakStaging:     c.held.peak.Load() * int64(c.opt.ChunkSize),
		WindowBytes:     int64(c.opt.Slots()) * int64(c.opt.ChunkSize),
		Failed:          s.failed.Load(),
		Canceled:        s.canceled.Load(),
		Last:            s.last,
	}
}

// window bounds the staging held by a copier's transfers in one direction: a semaphore of slots, one
// per staging buffer, taken before the buffer and given back after its copy has completed. Each
// direction has its own, as it has its own lanes: both ways at once sharing one window and one set
// of lanes moved far less (BenchmarkBothWays).
type window struct {
	tokens    chan struct{}
	held      *heldSlots // shared by the copier's windows
	waits     atomic.Uint64
	waitNanos atomic.Int64
}

// heldSlots counts the slots held in a copier's windows together, now and at most, for Stats.
type heldSlots struct{ now, peak atomic.Int64 }

// acquire takes a slot, waiting while all are held until ctx is done.
func (w *window) acquire(ctx context.Context) error {
	if w.tryAcquire() {
		return nil
	}
	w.waits.Add(1)
	t0 := time.Now()
	defer func() { w.waitNanos.Add(int64(time.Since(t0))) }()
	select {
	case w.tokens <- struct{}{}:
		w.taken()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tryAcquire takes a slot if one is free, without waiting.
func (w *window) tryAcquire() bool {
	select {
	case w.tokens <- struct{}{}:
		w.taken()
		return true
	default:
		return false
	}
}

// taken counts a slot just taken.
func (w *window) taken() {
	h := w.held.now.Add(1)
	for p := w.held.peak.Load(); h > p && !w.held.peak.CompareAndSwap(p, h); p = w.held.peak.Load() {
	}
}

// release gives a slot back.
func (w *window) release() {
	w.held.now.Add(-1)
	<-w.tokens
}
