package pinpool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pinpool/pinpool/hostmem"
)

// grow allocates new memory for the class: one backend allocation. For a
// Get (forGet) it returns the first new buffer, in use, counted as served
// after a miss; the rest, and everything Reserve grows, goes to the
// central list.
//
// The first growth of a class allocates its batch: one slab for a slab
// class, min(GrowCount, GrowBytes/size) buffers in one allocation for a
// large one (the seed's "grow by 4"). Each further growth doubles that,
// up to GrowBytes, until a trim of the class starts it over: a class
// that keeps missing is in demand, and fewer, larger allocations cost
// less per byte (prefault and registration run in parallel over a larger
// range, and the driver's fixed cost is paid less often). Under a budget
// a growth takes no more than the room left (at least its smallest
// allocation): a batch that overshoots what the load needs would evict
// other sizes' idle memory, which they then regrow. Reserve
// allocates up to what it still lacks (need buffers) at once, within the
// same bound. When the budget or the backend refuses an allocation of
// more than the smallest one, grow tries once more with the smallest.
// The caller holds no lock.
func (p *Pool) grow(c *class, forGet bool, need int) (*slot, error) {
	s, _, err := p.growWith(c, forGet, need, growReq{ctx: p.core.growCtx, maxBatch: c.maxBatch})
	return s, err
}

// growReq says how one growth allocates: under which context (the pool's,
// which Close cancels, or a Reserve's joined with it), reporting progress
// to whom, and how many buffers one allocation takes at most.
type growReq struct {
	ctx      context.Context
	progress func(made int64)
	maxBatch int
}

// growReserve is the growth of a Reserve that still lacks need buffers:
// one allocation of up to the class's reserve batch, under ctx and the
// pool's context. It returns the chunk it made.
func (p *Pool) growReserve(ctx context.Context, c *class, need int, progress func(int64)) (*chunk, error) {
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.core.growCtx, cancel)
	defer stop()
	_, ch, err := p.growWith(c, false, need, growReq{ctx: gctx, progress: progress, maxBatch: c.reserveBatch})
	if err != nil && p.core.isClosed() {
		return nil, ErrClosed
	}
	return ch, err
}

// growWith is one growth of the class, as rq says.
func (p *Pool) growWith(c *class, forGet bool, need int, rq growReq) (*slot, *chunk, error) {
	c.growMu.Lock()
	defer c.growMu.Unlock()
	co := p.core
	if forGet {
		// Another goroutine's growth may have made buffers idle meanwhile.
		if s := p.takeAfterMiss(c); s != nil {
			return s, nil, nil
		}
	}
	k := int(c.ramp.Load())
	if need > k {
		k = min(need, rq.maxBatch)
	}
	k = (k + c.perChunk - 1) / c.perChunk * c.perChunk // whole slabs
	k = co.budget.fit(k, c.perChunk, c.size)
	a, mem, took, err := p.allocate(c, k, rq)
	if err != nil && k > c.perChunk && !errors.Is(err, ErrClosed) && rq.ctx.Err() == nil {
		k = c.perChunk
		a, mem, took, err = p.allocate(c, k, rq)
	}
	if err != nil {
		c.ramp.Store(int64(c.batch))
		if co.isClosed() {
			return nil, nil, ErrClosed
		}
		return nil, nil, err
	}
	c.ramp.Store(int64(min(2*k, c.maxBatch)))
	if forGet {
		c.regrown(time.Now().UnixNano(), p.opt.maxDecay())
	}
	ch := c.newChunk(a, mem, k, forGet)
	if !co.addChunk(c, ch, took, forGet) {
		co.backendFree(a)
		co.budget.release(ch.bytes)
		return nil, nil, ErrClosed
	}
	rest := ch.slots
	var first *slot
	if forGet {
		first, rest = &ch.slots[0], rest[1:]
	}
	es := make([]entry, len(rest))
	for j := range rest {
		es[j] = entry{&rest[j], 0}
	}
	c.cache.putShared(es...)
	return first, ch, nil
}

// allocate reserves room for k buffers of the class and allocates them.
func (p *Pool) allocate(c *class, k int, rq growReq) (Allocation, []byte, time.Duration, error) {
	n := int64(k) * c.size
	if err := p.reserve(c, n); err != nil {
		return nil, nil, 0, err
	}
	if p.core.isClosed() {
		p.core.budget.release(n)
		return nil, nil, 0, ErrClosed
	}
	a, mem, took, err := p.core.backendAlloc(rq.ctx, n, rq.progress)
	if err != nil {
		p.core.budget.release(n)
	}
	return a, mem, took, err
}

// reserve makes room for n more bytes: within the budget (after polling
// fences, trimming idle memory of other classes beyond what Reserve keeps,
// and waiting for frees already under way) and above the system guard's
// floor.
func (p *Pool) reserve(c *class, n int64) error {
	co := p.core
	if err := co.guard.check(n); err != nil {
		p.trimOthers(n, c, TrimPressure)
		if err := co.guard.check(n); err != nil {
			co.lowMemory.Add(1)
			return err
		}
	}
	if co.budget.tryReserve(n) {
		return nil
	}
	p.pollPending(false)
	p.trimOthers(n, c, TrimCap)
	// Memory another goroutine (the janitor, a release after Close) is
	// giving back counts until its Free returns: wait for it rather than
	// refuse.
	if co.budget.tryReserve(n) || co.awaitFrees() && co.budget.tryReserve(n) {
		return nil
	}
	co.budgetRefusals.Add(1)
	if co.boundByLockLimit() {
		return &lockLimitError{need: n, size: c.size, limit: co.lockLimit, held: co.budget.held.Load()}
	}
	return fmt.Errorf("%w: need %d bytes for %d-byte buffers, holding %d of Budget %d", ErrBudget, n, c.size, co.budget.held.Load(), co.budget.limit)
}

// impossible explains why a request of class c can never be served, or
// returns nil: its allocation is larger than the whole budget, or than the
// memory the system guard would ever let the pool lock.
func (p *Pool) impossible(c *class) error {
	co := p.core
	if co.budget.limit > 0 && c.chunkBytes > co.budget.limit {
		co.budgetRefusals.Add(1)
		if co.boundByLockLimit() {
			return &lockLimitError{need: c.chunkBytes, size: c.size, limit: co.lockLimit, held: -1}
		}
		return fmt.Errorf("%w: a %d-byte buffer needs a %d-byte allocation, more than the whole Budget of %d bytes", ErrBudget, c.size, c.chunkBytes, co.budget.limit)
	}
	if g := &co.guard; g.minAvail > 0 && co.memTotal > 0 && c.chunkBytes > co.memTotal-g.minAvail {
		co.lowMemory.Add(1)
		return fmt.Errorf("%w: a %d-byte buffer needs a %d-byte allocation; the system has %d bytes (MemTotal) and keeps %d available (Options.MinAvailable)", ErrLowMemory, c.size, c.chunkBytes, co.memTotal, g.minAvail)
	}
	return nil
}

// lockLimitError is the budget error of a pool bounded by RLIMIT_MEMLOCK:
// one sentence with the limit and the fix. errors.Is matches ErrBudget and
// hostmem.ErrLockLimit.
type lockLimitError struct {
	need, size, limit int64
	held              int64 // < 0: the request is larger than the whole limit
}

func (e *lockLimitError) Error() string {
	if e.held < 0 {
		return fmt.Sprintf("pinpool: a %d-byte buffer needs %d bytes of locked memory, more than RLIMIT_MEMLOCK lets this process lock (%d bytes); raise it with %s",
			e.size, e.need, e.limit, hostmem.LockLimitHint())
	}
	return fmt.Sprintf("pinpool: a %d-byte buffer needs %d more bytes of locked memory, but %d of the %d bytes RLIMIT_MEMLOCK lets this process lock are in use; raise it with %s",
		e.size, e.need, e.held, e.limit, hostmem.LockLimitHint())
}

func (e *lockLimitError) Is(target error) bool {
	return target == ErrBudget || target == hostmem.ErrLockLimit
}

// takeAfterMiss claims an idle buffer for a Get that already counted a
// miss, and counts it served after a miss, under core.mu so that Stats
// never sees the one without the other.
func (p *Pool) takeAfterMiss(c *class) *slot {
	co := p.core
	co.mu.Lock()
	defer co.mu.Unlock()
	s := c.findIdle()
	if s != nil {
		c.missServed++
	}
	return s
}
