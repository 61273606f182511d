package pinpool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinpool/pinpool/hostmem"
	"github.com/pinpool/pinpool/internal/sizeclass"
)

// MaxSize is the largest buffer a pool hands out (1 TiB).
const MaxSize = sizeclass.Max

// Pool hands out pinned buffers. Get and Release of a buffer size the pool
// has already served cost tens of nanoseconds and call no driver: buffers
// come from per-processor caches of idle memory. When a size runs out, the
// pool grows through its Backend, in batches, within its budget. Idle memory
// goes back to the system by policy (MaxIdle, IdleTimeout) or on Trim, in
// the background. A Pool is safe for concurrent use.
type Pool struct {
	opt        Options
	backend    Backend
	ownBackend io.Closer // the default backend this pool made, closed by Close
	nshards    int
	minAvail   int64 // system guard floor in bytes; 0: off

	classMu sync.Mutex
	dense   []atomic.Pointer[class]          // rounding mode, by size class index
	exact   atomic.Pointer[map[int64]*class] // exact mode, by page-rounded size
	all     atomic.Pointer[[]*class]

	budget  budget
	pending pendingList
	pollMu  sync.Mutex
	jan     janitor
	closed  atomic.Bool
	closeMu sync.Mutex
	// lateDrain is set while a goroutine polls fences after Close.
	lateDrain atomic.Bool

	stats poolCounters
}

// New makes a pool. It allocates nothing until the first Get or Reserve.
func New(opt Options) (*Pool, error) {
	o := opt.withDefaults()
	if o.Budget < 0 {
		return nil, fmt.Errorf("pinpool: negative Budget %d", o.Budget)
	}
	b := o.Backend
	var own io.Closer
	if b == nil {
		var err error
		if b, err = DefaultBackend(); err != nil {
			return nil, err
		}
		own, _ = b.(io.Closer)
	}
	p := &Pool{opt: o, backend: b, ownBackend: own, nshards: runtime.GOMAXPROCS(0)}
	p.budget.limit = o.Budget
	if !o.Exact {
		p.dense = make([]atomic.Pointer[class], sizeclass.Count())
	}
	switch {
	case o.MinAvailable > 0:
		p.minAvail = o.MinAvailable
	case o.MinAvailable == 0:
		if mi, err := hostmem.ReadMemInfo(); err == nil {
			p.minAvail = int64(mi.Total / 100 * DefaultMinAvailablePercent)
		}
	}
	p.jan = janitor{kickCh: make(chan struct{}, 1), stopCh: make(chan struct{}), done: make(chan struct{})}
	go p.runJanitor()
	return p, nil
}

// classFor returns the class serving n bytes, creating it on first use.
func (p *Pool) classFor(n int) (*class, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if n <= 0 || int64(n) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes (want 1 .. %d)", ErrInvalidSize, n, int64(MaxSize))
	}
	if p.opt.Exact {
		size := pageRound(int64(n))
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
	} else if m := p.exact.Load(); m != nil && (*m)[size] != nil {
		return (*m)[size]
	}
	c := newClass(p, size)
	if idx >= 0 {
		p.dense[idx].Store(c)
	} else {
		m := map[int64]*class{}
		if old := p.exact.Load(); old != nil {
			for k, v := range *old {
				m[k] = v
			}
		}
		m[size] = c
		p.exact.Store(&m)
	}
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
// the budget (or the system guard), until a release makes room or ctx is
// done; then it returns an error wrapping ErrBudget and ctx's error.
func (p *Pool) Get(ctx context.Context, n int) (Buffer, error) {
	c, err := p.classFor(n)
	if err != nil {
		return Buffer{}, err
	}
	if s := c.pop(); s != nil {
		return p.handOut(s, n), nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return p.getSlow(ctx, c, n, true)
}

// TryGet is Get that never blocks: when the budget or the system guard
// would be exceeded it returns an error wrapping ErrBudget.
func (p *Pool) TryGet(n int) (Buffer, error) {
	c, err := p.classFor(n)
	if err != nil {
		return Buffer{}, err
	}
	if s := c.pop(); s != nil {
		return p.handOut(s, n), nil
	}
	return p.getSlow(nil, c, n, false)
}

func (p *Pool) handOut(s *slot, n int) Buffer {
	if p.opt.Debug {
		checkPoison(s, s.chunk.class.size)
	}
	return Buffer{s: s, gen: s.gen.Load(), n: n}
}

// getSlow serves a request the processor's shard could not: from the
// central list, other shards, completed fences, growth, and finally by
// waiting for room.
func (p *Pool) getSlow(ctx context.Context, c *class, n int, wait bool) (_ Buffer, err error) {
	waiting := false
	defer func() {
		if err != nil {
			c.failed.Add(1)
		}
	}()
	defer func() {
		if waiting {
			p.budget.waiters.Add(-1)
		}
	}()
	for {
		var wake <-chan struct{}
		if wait && waiting {
			wake = p.budget.channel()
		}
		if s := c.reuse(); s != nil {
			return p.handOut(s, n), nil
		}
		if c.pending.Load() > 0 && p.pollPending(false) >= 0 {
			if s := c.reuse(); s != nil {
				return p.handOut(s, n), nil
			}
		}
		s, grew, err := p.grow(c, true)
		if err == nil {
			if grew {
				c.grewServed.Add(1)
			}
			return p.handOut(s, n), nil
		}
		if !wait || !errors.Is(err, ErrBudget) || errors.Is(err, ErrClosed) {
			return Buffer{}, err
		}
		if !waiting { // register, then retry once before sleeping
			waiting = true
			p.budget.waiters.Add(1)
			p.stats.budgetWaits.Add(1)
			continue
		}
		select {
		case <-ctx.Done():
			return Buffer{}, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-wake:
		}
		if p.closed.Load() {
			return Buffer{}, ErrClosed
		}
	}
}

// grow allocates new memory for class c and returns one new buffer; the
// rest of the batch goes to the central list. With reuse set it first
// checks whether another goroutine's growth already made a buffer idle.
func (p *Pool) grow(c *class, reuse bool) (s *slot, grew bool, err error) {
	c.growMu.Lock()
	defer c.growMu.Unlock()
	if reuse {
		if s := c.reuse(); s != nil {
			return s, false, nil
		}
		c.misses.Add(1)
		p.stats.misses.Add(1)
	}
	count := 1
	if c.perChunk == 1 {
		count = int(max(1, min(int64(p.opt.GrowCount), p.opt.GrowBytes/c.size)))
	}
	var first *slot
	for i := 0; i < count; i++ {
		if err := p.reserve(c, c.chunkBytes); err != nil {
			if first != nil {
				break
			}
			return nil, false, err
		}
		if p.closed.Load() {
			p.budget.release(c.chunkBytes)
			if first != nil {
				c.pushCentral(first)
				c.trim(-1, 0, nil)
			}
			return nil, false, ErrClosed
		}
		t0 := time.Now()
		a, err := p.backend.Alloc(int(c.chunkBytes))
		dt := time.Since(t0)
		if err != nil {
			p.budget.release(c.chunkBytes)
			p.stats.failures.Add(1)
			if first != nil {
				break
			}
			return nil, false, fmt.Errorf("%w: %d bytes for buffers of %d bytes from %s: %w", ErrGrow, c.chunkBytes, c.size, p.backend.Name(), err)
		}
		if got := len(a.Bytes()); got < int(c.chunkBytes) {
			a.Free()
			p.budget.release(c.chunkBytes)
			p.stats.failures.Add(1)
			if first != nil {
				break
			}
			return nil, false, fmt.Errorf("%w: backend %s returned %d bytes, asked %d", ErrGrow, p.backend.Name(), got, c.chunkBytes)
		}
		p.stats.recordGrow(c.chunkBytes, dt)
		c.grows.Add(1)
		ch := c.newChunk(a)
		rest := ch.slots
		if first == nil {
			first, rest = &ch.slots[0], ch.slots[1:]
		}
		if len(rest) > 0 {
			ptrs := make([]*slot, len(rest))
			for j := range rest {
				ptrs[j] = &rest[j]
			}
			c.pushCentral(ptrs...)
		}
	}
	return first, true, nil
}

// reserve makes room for n more bytes: within the budget (trimming idle
// memory of any class when needed) and above the system guard's floor.
func (p *Pool) reserve(c *class, n int64) error {
	if p.minAvail > 0 {
		if mi, err := hostmem.ReadMemInfo(); err == nil && int64(mi.Available)-n < p.minAvail {
			p.trimAll(n, c)
			if mi, err := hostmem.ReadMemInfo(); err == nil && int64(mi.Available)-n < p.minAvail {
				p.stats.lowMemory.Add(1)
				return fmt.Errorf("%w: need %d bytes, MemAvailable %d, floor %d", ErrLowMemory, n, mi.Available, p.minAvail)
			}
		}
	}
	if p.budget.tryReserve(n) {
		return nil
	}
	p.pollPending(false)
	p.trimAll(n, c)
	if p.budget.tryReserve(n) {
		return nil
	}
	p.stats.budgetRefusals.Add(1)
	return fmt.Errorf("%w: need %d bytes for %d-byte buffers, holding %d of %d", ErrBudget, n, c.size, p.budget.held.Load(), p.budget.limit)
}

// trimAll frees idle memory of every class but except until want bytes
// are freed. (The class that grows is spared: its idle buffers, if any,
// would have been used instead of growing, or were just made by Reserve.)
func (p *Pool) trimAll(want int64, except *class) int64 {
	var freed int64
	for _, c := range p.classList() {
		if freed >= want {
			break
		}
		if c == except {
			continue
		}
		f, _ := c.trim(want-freed, 0, nil)
		freed += f
	}
	return freed
}

// afterRelease runs after a buffer went back to its class: it wakes Get
// calls waiting for room, and after Close frees what is now unused.
func (p *Pool) afterRelease(c *class) {
	p.budget.broadcast()
	if p.closed.Load() {
		c.trim(-1, 0, nil)
	}
}

// Reserve pre-warms the pool: afterwards at least count buffers for n-byte
// requests are idle, so the next count Gets of n bytes do not grow, and the
// background policy (MaxIdle, IdleTimeout) keeps that many idle buffers of
// the size from then on; only Trim frees them. It fails with ErrBudget when
// the budget does not allow it.
func (p *Pool) Reserve(n, count int) error {
	c, err := p.classFor(n)
	if err != nil {
		return err
	}
	if count < 0 {
		return fmt.Errorf("%w: negative count %d", ErrInvalidSize, count)
	}
	for {
		r := c.reserved.Load()
		if int64(count) <= r || c.reserved.CompareAndSwap(r, int64(count)) {
			break
		}
	}
	for c.idleCount() < count {
		s, _, err := p.grow(c, false)
		if err != nil {
			return err
		}
		c.pushCentral(s)
	}
	return nil
}

// Trim gives every idle buffer's memory back to the backend now (whole
// chunks: a slab is freed when all of its buffers are idle), including what
// Reserve kept, and returns the bytes freed. Buffers in use or waiting on a
// fence are not touched.
func (p *Pool) Trim() int64 {
	p.pollPending(true)
	var freed int64
	for _, c := range p.classList() {
		c.reserved.Store(0)
		f, _ := c.trim(-1, 0, nil)
		freed += f
	}
	return freed
}

// Release gives back a buffer, like b.Release, after checking that b
// belongs to this pool (ErrForeign otherwise).
func (p *Pool) Release(b Buffer) error {
	if b.s != nil && b.s.chunk.class.pool != p {
		return ErrForeign
	}
	return b.Release()
}

// Owns reports whether b was handed out by this pool (live or not).
func (p *Pool) Owns(b Buffer) bool { return b.s != nil && b.s.chunk.class.pool == p }

// Close frees every idle buffer and stops the pool's background goroutine
// once no fence is pending. Buffers still handed out, or waiting on a
// fence, are freed when they come back; after that the backend holds
// nothing from this pool. Get, TryGet and Reserve return ErrClosed from
// now on; releases keep working. A second Close returns ErrClosed.
func (p *Pool) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed.Swap(true) {
		return ErrClosed
	}
	close(p.jan.stopCh)
	p.budget.broadcast()
	p.pollPending(true)
	var errs []error
	for _, c := range p.classList() {
		c.growMu.Lock() // wait for growth in flight
		c.growMu.Unlock()
		if _, err := c.trim(-1, 0, nil); err != nil {
			errs = append(errs, err)
		}
	}
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
func (p *Pool) Backend() Backend { return p.backend }

// String describes the pool in one line.
func (p *Pool) String() string {
	st := p.Stats()
	return fmt.Sprintf("pinpool.Pool(%s: held %d, in use %d, idle %d, pending %d bytes; %d classes)",
		st.Backend, st.BytesHeld, st.BytesInUse, st.BytesIdle, st.BytesPending, len(st.Classes))
}
