package pinpool

import (
	"context"
	"fmt"
	"sync"
)

// reserveAllocBytes bounds one allocation of a Reserve of many buffers:
// the buffers of an allocation are usable as soon as it is made, so a
// large reservation is served part by part while the rest is still being
// pinned, and a cancelled one stops after the allocation in progress. A
// single buffer larger than this is one allocation (made in bounded
// pieces by a ContextBackend). BenchmarkArena measures the cost of the
// bound against one allocation of the whole.
const reserveAllocBytes = 1 << 30

// Reserve pre-warms the pool: afterwards at least count buffers for n-byte
// requests are idle, so the next count Gets of n bytes do not grow. From
// then on the pool keeps that many idle buffers of the size: neither the
// background policy (MaxIdle, IdleTimeout) nor the budget's trimming for
// other sizes frees them; only Trim and Close do. It fails with ErrBudget
// when the budget does not allow it: at once when count buffers could
// never fit, else when growing finds no room; a failed Reserve keeps no
// claim, and gives back the memory it grew that no Get has taken, so the
// pool goes on serving what fits. It is ReserveContext without a context
// or progress.
func (p *Pool) Reserve(n, count int) error {
	return p.ReserveContext(context.Background(), n, count, nil)
}

// ReserveContext is Reserve that can be cancelled and reports progress,
// for reservations that take seconds (tens of GiB). It grows in
// allocations of at most 1 GiB (a single larger buffer is one allocation,
// which the CUDA backends pin in bounded pieces), and the buffers of each
// are usable by Gets at once. progress, if not nil, is called after each
// step with the bytes this call has made so far and the bytes it will
// make in all, rising, never twice at once (a backend that pins in
// parallel may call it from its own goroutines). A panic in progress is
// raised again from ReserveContext, once the Reserve has dropped its
// claim and freed what it grew, as a failed Reserve does. When ctx is done, or
// the pool is closed, it stops within one step (an error wrapping ctx's
// error, or ErrClosed) and, like a failed Reserve, keeps no claim and
// frees what it grew that is still idle.
func (p *Pool) ReserveContext(ctx context.Context, n, count int, progress func(made, total int64)) error {
	c, err := p.classFor(n)
	if err != nil {
		return err
	}
	if count < 0 {
		return fmt.Errorf("%w: negative count %d", ErrInvalidSize, count)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if count > 0 {
		if err := p.impossible(c); err != nil {
			return err
		}
		if lim := p.core.budget.limit; lim > 0 && int64(count) > lim/c.size {
			p.core.budgetRefusals.Add(1)
			return fmt.Errorf("%w: Reserve of %d buffers of %d bytes needs more than the limit of %d bytes", ErrBudget, count, c.size, lim)
		}
	}
	done := c.claimReserve(int64(count))
	need := max(0, count-c.idleCount())
	total := int64((need+c.perChunk-1)/c.perChunk*c.perChunk) * c.size // whole slabs
	var made int64
	var grown []*chunk
	fail := func() {
		done(false)
		p.giveBack(c, grown)
		p.core.budget.broadcast()
	}
	cb := reserveProgress{f: progress}
	for idle := c.idleCount(); idle < count; idle = c.idleCount() {
		err := ctx.Err()
		if err != nil {
			err = fmt.Errorf("pinpool: Reserve of %d buffers of %d bytes stopped after %d of %d bytes: %w", count, c.size, made, total, err)
		} else if p.core.isClosed() {
			err = ErrClosed
		}
		var ch *chunk
		if err == nil {
			ch, err = p.growReserve(ctx, c, count-idle, func(b int64) { cb.report(min(made+b, total), total) })
		}
		if err == nil {
			grown = append(grown, ch)
			made += ch.bytes
			if made < total {
				cb.report(made, total)
			}
		}
		if r, ok := cb.panicked(); ok {
			fail()
			panic(r)
		}
		if err != nil {
			fail()
			return err
		}
	}
	done(true)
	if total > 0 {
		cb.report(total, total) // also when other growths made part of it
	}
	if r, ok := cb.panicked(); ok {
		panic(r)
	}
	return nil
}

// reserveProgress calls a Reserve's progress callback one call at a time,
// from whichever goroutine reports (the backend's own, when it pins in
// parallel), and keeps the callback's panic instead of letting it end that
// goroutine or pass for the backend's: ReserveContext raises it again from
// the caller's goroutine once it has cleaned up.
type reserveProgress struct {
	f      func(made, total int64)
	mu     sync.Mutex
	failed bool
	value  any
}

func (r *reserveProgress) report(made, total int64) {
	if r.f == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed {
		return
	}
	defer func() {
		if v := recover(); v != nil {
			r.failed, r.value = true, v
		}
	}()
	r.f(made, total)
}

func (r *reserveProgress) panicked() (any, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.value, r.failed
}

// giveBack frees the chunks a failed Reserve grew whose buffers are all
// idle, sparing what other Reserves keep.
func (p *Pool) giveBack(c *class, grown []*chunk) {
	if len(grown) == 0 {
		return
	}
	mine := make(map[*chunk]bool, len(grown))
	for _, ch := range grown {
		mine[ch] = true
	}
	c.trimClass(trimPlan{want: -1, keep: int(c.reserved.Load()), reason: TrimReserveFailed, pick: func(ch *chunk) bool { return mine[ch] }})
}
