package pinpool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinpool/pinpool/internal/sizeclass"
)

// MaxSize is the largest buffer a pool hands out (1 TiB).
const MaxSize = 1 << 40

// Pool hands out pinned buffers. Get and Release of a buffer size the pool
// has already served cost tens of nanoseconds and call no driver: buffers
// come from per-processor caches of idle memory. When a size
// runs out, the pool grows through its Backend, in batches, within its
// budget. Idle memory goes back to the system by policy (MaxIdle,
// IdleTimeout) or on Trim, in the background. A Pool is safe for
// concurrent use.
type Pool struct {
	// Read on every Get; written only when a class is added.
	opt   Options
	core  *core
	dense []atomic.Pointer[class]          // rounding mode, by size class index
	exact atomic.Pointer[map[int64]*class] // exact mode, by page-rounded size
	_     [cacheLine]byte                  // keeps the fields below off those lines

	ownBackend io.Closer // the default backend this pool made, closed by Close
	classMu    sync.Mutex
	all        atomic.Pointer[[]*class]

	pollMu   sync.Mutex  // one fence poll at a time
	jan      janitor     // the background goroutine
	draining atomic.Bool // a goroutine polls fences after Close
	closeMu  sync.Mutex  // one Close at a time
}

// New makes a pool. It checks every option (an error wrapping
// ErrInvalidOptions names the field) and allocates nothing until the first
// Get or Reserve.
func New(opt Options) (*Pool, error) {
	o, memTotal, err := opt.validate()
	if err != nil {
		return nil, err
	}
	b := o.Backend
	var own io.Closer
	if b == nil {
		if b, err = DefaultBackend(); err != nil {
			return nil, err
		}
		own, _ = b.(io.Closer)
	}
	p := &Pool{opt: o, ownBackend: own}
	co := &core{
		backend:     b,
		backendName: backendNameOf(b),
		debug:       o.Debug,
		memTotal:    memTotal,
		page:        systemPage,
		closedCh:    make(chan struct{}),
		kick:        p.kick,
	}
	co.budget.limit, co.userBudget = o.Budget, o.Budget
	if lb, ok := b.(lockBounded); ok {
		if n, limited := lb.LockAllowance(); limited {
			// The kernel would refuse to lock more: keep within it as
			// within a budget, so that Get waits and TryGet says why
			// instead of failing in mlock.
			// A limit of 0 is a budget of 1 byte, which no allocation
			// fits in (a budget of 0 means none).
			co.lockLimit, co.lockLimited = n, true
			if lim := max(n, 1); co.budget.limit == 0 || lim < co.budget.limit {
				co.budget.limit = lim
				o.Budget = lim // slabs are cut to fit it
				p.opt = o
			}
		}
	}
	co.growCtx, co.stopGrowth = context.WithCancel(context.Background())
	if gl, ok := b.(GrowLimiter); ok {
		co.growLimit = int64(max(0, growLimitOf(gl)))
	}
	co.freed = sync.NewCond(&co.mu)
	co.budget.waiters = &co.waiters
	co.guard.init(o.MinAvailable, memTotal)
	p.core = co
	if !o.Exact {
		p.dense = make([]atomic.Pointer[class], sizeclass.Count())
	}
	p.jan = janitor{kickCh: make(chan struct{}, 1), stopCh: make(chan struct{}), done: make(chan struct{})}
	go p.runJanitor()
	return p, nil
}

// kick wakes the janitor, or after Close a goroutine that polls the fences
// still pending (the janitor may have ended).
func (p *Pool) kick() {
	if p.core.isClosed() {
		if !p.draining.Load() {
			go p.drainAfterClose()
		}
		return
	}
	p.jan.kick()
}

// classFor returns the class serving n bytes, creating it on first use.
func (p *Pool) classFor(n int) (*class, error) {
	if p.core.isClosed() {
		return nil, ErrClosed
	}
	if n <= 0 || int64(n) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes (want 1 .. %d)", ErrInvalidSize, n, int64(MaxSize))
	}
	if p.opt.Exact {
		size := roundUp(int64(n), p.core.page)
		if m := p.exact.Load(); m != nil {
			if c := (*m)[size]; c != nil {
				return c, nil
			}
		}
		return p.addClass(-1, size), nil
	}
	i, err := sizeclass.Index(int64(n))
	if err != nil {
		return nil, fmt.Errorf("%w: %d bytes", ErrInvalidSize, n)
	}
	if c := p.dense[i].Load(); c != nil {
		return c, nil
	}
	return p.addClass(i, sizeclass.Size(i)), nil
}

func (p *Pool) addClass(idx int, size int64) *class {
	p.classMu.Lock()
	defer p.classMu.Unlock()
	if idx >= 0 {
		if c := p.dense[idx].Load(); c != nil {
			return c
		}
		if size%p.core.page != 0 {
			// Pages larger than this class: the class of the next page
			// multiple serves it (a class size, as the classes above a
			// page are page multiples), so that every buffer starts and
			// ends on a page boundary.
			j, _ := sizeclass.Index(roundUp(size, p.core.page))
			c := p.dense[j].Load()
			if c == nil {
				c = p.listClass(sizeclass.Size(j))
				p.dense[j].Store(c)
			}
			p.dense[idx].Store(c)
			return c
		}
	} else if m := p.exact.Load(); m != nil && (*m)[size] != nil {
		return (*m)[size]
	}
	c := p.listClass(size)
	if idx >= 0 {
		p.dense[idx].Store(c)
	} else {
		m := map[int64]*class{}
		if old := p.exact.Load(); old != nil {
			m = maps.Clone(*old)
		}
		m[size] = c
		p.exact.Store(&m)
	}
	return c
}

// listClass makes a class and lists it, before any Get can find it: a Get
// that grows it adds to the held bytes, and Stats must see the class those
// bytes belong to. The caller holds classMu.
func (p *Pool) listClass(size int64) *class {
	c := newClass(p.core, &p.opt, size)
	var list []*class
	if old := p.all.Load(); old != nil {
		list = append(list, *old...)
	}
	list = append(list, c)
	p.all.Store(&list)
	return c
}

func (p *Pool) classList() []*class {
	if l := p.all.Load(); l != nil {
		return *l
	}
	return nil
}

// Get returns a buffer of n bytes. It blocks while serving it would exceed
// the budget (or the system guard), until a release makes room, ctx is
// done (an error wrapping ErrBudget and ctx's error) or the pool is closed
// (ErrClosed). A request that could never be served (its allocation is
// larger than the whole Budget, or than the memory the system guard lets
// the pool lock) fails at once with ErrBudget or ErrLowMemory.
func (p *Pool) Get(ctx context.Context, n int) (Buffer, error) {
	c, err := p.classFor(n)
	if err != nil {
		return Buffer{}, err
	}
	if e := c.cache.get(); e.s != nil {
		return p.handOut(e.s, e.gen, n), nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return p.getSlow(ctx, c, n, true)
}

// TryGet is Get that does not wait for room: when the budget or the system
// guard would be exceeded it returns an error wrapping ErrBudget. (It does
// wait for memory the pool is already giving back to the backend, whose
// bytes count until the backend's Free returns.)
func (p *Pool) TryGet(n int) (Buffer, error) {
	c, err := p.classFor(n)
	if err != nil {
		return Buffer{}, err
	}
	if e := c.cache.get(); e.s != nil {
		return p.handOut(e.s, e.gen, n), nil
	}
	return p.getSlow(context.Background(), c, n, false) // never waits: the context is not looked at
}

// handOut makes the handle of a claimed slot (in use, generation gen).
func (p *Pool) handOut(s *slot, gen uint64, n int) Buffer {
	if p.core.debug {
		checkPoison(s, gen, s.chunk.class.size)
	}
	return Buffer{s: s, gen: gen, n: n}
}

// handOutSlot is handOut for a slot claimed by the slow path.
func (p *Pool) handOutSlot(s *slot, n int) Buffer {
	return p.handOut(s, genOf(s.state.Load()), n)
}

// lowMemoryRetry is how often a Get waiting on the system guard looks
// again: memory that other processes free wakes no one.
const lowMemoryRetry = 20 * time.Millisecond

// getSlow serves a request the processor's private cache could not: from
// the shared caches, completed fences and a scan of the chunks (hits);
// then, counted once as a miss, by growing, and finally by waiting for
// room.
func (p *Pool) getSlow(ctx context.Context, c *class, n int, wait bool) (Buffer, error) {
	co := p.core
	if s := c.findIdle(); s != nil {
		return p.handOutSlot(s, n), nil
	}
	if c.pending.Load() > 0 && p.pollPending(false) >= 0 {
		if s := c.findIdle(); s != nil {
			return p.handOutSlot(s, n), nil
		}
	}
	c.misses.Add(1)
	if err := p.impossible(c); err != nil {
		return Buffer{}, err
	}
	waiting := false
	var waitStart time.Time
	defer func() {
		if waiting {
			co.waiters.Add(-1)
			co.waitTimes.observe(time.Since(waitStart))
		}
	}()
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		var wake <-chan struct{}
		if waiting {
			wake = co.budget.channel()
		}
		if co.isClosed() {
			return Buffer{}, ErrClosed
		}
		s, err := p.grow(c, true, 1)
		if err == nil {
			return p.handOutSlot(s, n), nil
		}
		if !wait || !errors.Is(err, ErrBudget) || hopeless(err) {
			return Buffer{}, err
		}
		if !waiting { // register, then look once more before sleeping
			waiting, waitStart = true, time.Now()
			co.waiters.Add(1)
			co.budgetWaits.Add(1)
			continue
		}
		var retryC <-chan time.Time
		if errors.Is(err, ErrLowMemory) {
			if retry == nil {
				retry = time.NewTimer(lowMemoryRetry)
			} else {
				retry.Reset(lowMemoryRetry)
			}
			retryC = retry.C
		}
		select {
		case <-ctx.Done():
			return Buffer{}, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-co.closedCh:
			return Buffer{}, ErrClosed
		case <-wake:
		case <-retryC:
		}
	}
}

// Trim gives every idle buffer's memory back to the backend now (whole
// allocations: a slab is freed when all of its buffers are idle),
// including what Reserve kept, and returns the bytes it freed once the
// frees that began elsewhere (the janitor's) are done too. Buffers in use
// or waiting on a fence are not touched; fences are polled first, also
// after Close (see Close).
func (p *Pool) Trim() int64 {
	p.pollPending(true)
	var freed int64
	for _, c := range p.classList() {
		c.dropKept()
		f, _ := c.trimClass(trimPlan{want: -1, reason: TrimExplicit})
		freed += f
	}
	p.core.awaitFrees() // frees the janitor began are back too when Trim returns
	return freed
}

// Release gives back a buffer, like b.Release, after checking that b
// belongs to this pool (ErrForeign otherwise).
func (p *Pool) Release(b Buffer) error {
	if b.s != nil && b.s.chunk.class.core != p.core {
		return ErrForeign
	}
	return b.Release()
}

// Owns reports whether b was handed out by this pool (live or not).
func (p *Pool) Owns(b Buffer) bool { return b.s != nil && b.s.chunk.class.core == p.core }

// Close frees every idle buffer, wakes every Get waiting for room (they
// return ErrClosed), and stops the pool's background goroutine. Get,
// TryGet and Reserve return ErrClosed from now on; releases keep working.
// A second Close returns ErrClosed.
//
// Buffers still handed out are freed when they are released. Buffers
// waiting on a fence are freed when it completes: the pool keeps polling
// those fences in the background, backing off to every 100 ms, for
// Options.CloseWait (one minute by default). A buffer whose fence has not
// completed by then stays allocated, since the device may still use it;
// Stats counts it as pending and a later Trim polls it again. Once
// everything has come back, the backend holds nothing from this pool.
func (p *Pool) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	co := p.core
	co.mu.Lock()
	if co.closed {
		co.mu.Unlock()
		return ErrClosed
	}
	co.closed = true
	co.closedFlag.Store(true)
	close(co.closedCh)
	co.mu.Unlock()
	co.stopGrowth() // growths in flight stop after their current piece
	close(p.jan.stopCh)
	p.pollPending(true)
	var errs []error
	for _, c := range p.classList() {
		c.growMu.Lock()
		//lint:ignore SA2001 the lock is taken only to wait for a growth in flight
		c.growMu.Unlock()
		if _, err := c.trimClass(trimPlan{want: -1, reason: TrimClose}); err != nil {
			errs = append(errs, err)
		}
	}
	co.awaitFrees() // frees that the janitor or a release began meanwhile
	if p.ownBackend != nil {
		// The CUDA backend keeps its context until its last chunk is freed,
		// so buffers still out stay valid and are freed on release.
		if err := p.ownBackend.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Backend is the pool's backend.
func (p *Pool) Backend() Backend { return p.core.backend }

// String describes the pool in one line.
func (p *Pool) String() string {
	st := p.Stats()
	return fmt.Sprintf("pinpool.Pool(%s: held %d, in use %d, idle %d, pending %d bytes; %d classes)",
		st.Backend, st.BytesHeld, st.BytesInUse, st.BytesIdle, st.BytesPending, len(st.Classes))
}
