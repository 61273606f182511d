package transfer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pinpool/pinpool"
)

// Step 3 of a transfer: run. staged runs one staged transfer by its plan,
// cooperatively (coop.go) or chunked (below). In both modes the calling
// goroutine is a lane, offers the transfer to plan.lanes-1 standing lanes,
// and returns only when every copy it issued has completed, also after a
// failure or cancellation, so that no DMA runs into memory that was given
// back.

// staged copies the pageable memory of o through staging buffers.
func (c *Copier) staged(ctx context.Context, o op) error {
	lanes := c.lanes[o.dir]
	active := lanes.arrive()
	defer lanes.leave()
	asleep := lanes.asleep()
	p := planStaging(len(o.host), o.dir, active, asleep, c.opt, c.tune)
	if p.mode == cooperative {
		if ok, err := c.coop(ctx, o, p); ok {
			return err
		}
		// The window or the pool could not give the transfer all its
		// staging at once: run it chunked, which waits for staging as it
		// goes.
		p = planStaging(len(o.host), o.dir, active, asleep, c.opt, tuning{minChunk: c.tune.minChunk})
	}
	return c.chunked(ctx, o, p)
}

// chunkedRun is the shared state of one chunked transfer: its chunks are
// claimed by index, and the first error stops every lane.
type chunkedRun struct {
	c   *Copier
	ctx context.Context
	o   op
	p   plan

	next      atomic.Int64 // next chunk index to claim
	issued    atomic.Int64 // bytes whose copy was queued
	completed atomic.Int64 // chunks completed

	// Device to host, the copy-outs shared among the lanes (share.go):
	// shares under shareMu (a leaf of the lock order), their number in
	// nShares for the helpers to look at without the lock.
	shareMu sync.Mutex
	shares  []*outShare
	nShares atomic.Int32
	runState
}

// inFlight is one chunk whose copy is queued: the chunk's range of the
// transfer, the staging buffer it is copied into or out of, and the event
// recorded after its copy.
type inFlight struct {
	ev  event
	off int
	n   int
	buf pinpool.Buffer
}

// chunked runs a chunked transfer. A lane owns each chunk it claims from
// start to end, the same way in both directions: it takes a window slot
// and a staging buffer, copies the chunk into the buffer (host to device),
// issues the copy and its event, and goes on to its next chunk; once it
// holds plan.depth chunks in flight it completes the oldest. So no lane
// waits for another, and a lane's CPU copies overlap the DMA of its own
// earlier chunks and of the other lanes'.
func (c *Copier) chunked(ctx context.Context, o op, p plan) error {
	r := &chunkedRun{c: c, ctx: ctx, o: o, p: p}
	lanes := c.lanes[o.dir]
	lanes.offer(r, p.lanes-1)
	r.lane()
	lanes.withdraw(r) // every chunk is claimed: no lane need join now
	r.endJoins(lanes.endSpinFor())
	return r.err
}

// join runs a lane of r on a standing lane.
func (r *chunkedRun) join() { r.joinLane(r.lane) }

// claim returns the offset and length of the next chunk, or ok false when
// none is left or the transfer stopped (after recording ctx's error).
func (r *chunkedRun) claim() (off, n int, ok bool) {
	if r.stop.Load() {
		return 0, 0, false
	}
	if err := r.ctx.Err(); err != nil {
		r.fail(cancelErr(r.o, int(r.issued.Load()), err))
		return 0, 0, false
	}
	i := int(r.next.Add(1) - 1)
	if i >= r.p.chunks {
		return 0, 0, false
	}
	lo, hi := r.p.chunkRange(i)
	return lo, hi - lo, true
}

// laneQueue is a lane's chunks in flight, oldest first.
type laneQueue struct {
	r    *chunkedRun
	held []inFlight
}

// completeOldest completes the lane's oldest chunk in flight; it reports
// false when the lane holds none.
func (q *laneQueue) completeOldest() bool {
	if len(q.held) == 0 {
		return false
	}
	f := q.held[0]
	q.held = append(q.held[:0], q.held[1:]...)
	q.r.complete(f)
	return true
}

// lane claims, stages, issues and completes chunks until none is left or
// the transfer stops, then completes the chunks it still has in flight.
func (r *chunkedRun) lane() {
	c, o := r.c, r.o
	c.stats.lanes.Add(1)
	q := &laneQueue{r: r, held: make([]inFlight, 0, r.p.depth)}
	defer func() {
		for q.completeOldest() {
		}
		if o.dir == DeviceToHost && r.p.lanes > 1 {
			r.help()
		}
	}()
	for {
		off, m, ok := r.claim()
		if !ok {
			return
		}
		if len(q.held) >= r.p.depth {
			q.completeOldest()
		}
		buf, ok := r.stage(off, q)
		if !ok {
			return
		}
		b := buf.Bytes()[:m]
		if o.dir == HostToDevice {
			// Cached stores: a large transfer's chunks cycle through a
			// window that stays in the last-level cache, where streaming
			// stores would add two trips to memory per byte (and were
			// slower also for the first and the last round of chunks,
			// which the DMA reads right away; so was evicting the chunks
			// after the copy: BenchmarkStagedSizes).
			copyBytes(b, o.host[off:off+m], true)
		}
		c.issuing[o.dir].lock()
		ev, unsure, err := c.issue(c.stream(o.dir), o, PathStaged, off, b)
		c.issuing[o.dir].unlock()
		if err != nil {
			r.fail(err) // before the slot is free for the other lanes
			if unsure {
				buf.ReleaseAfter(failedFence{err})
			} else {
				buf.Release() // the copy is not running
			}
			c.wins[o.dir].release()
			return
		}
		f := inFlight{ev: ev, off: off, n: m, buf: buf}
		r.issued.Add(int64(m))
		c.stats.chunks.Add(1)
		q.held = append(q.held, f)
	}
}

// stage takes a window slot and a staging buffer for the chunk at off. While
// the lane holds chunks in flight it does not wait for either: it completes
// its oldest chunk, which gives back a slot and a buffer, and tries again,
// so that lanes never wait on each other's staging. On failure the
// transfer is stopped and nothing new is held.
func (r *chunkedRun) stage(off int, q *laneQueue) (pinpool.Buffer, bool) {
	c, w := r.c, r.c.wins[r.o.dir]
	for !w.tryAcquire() {
		if q.completeOldest() {
			continue
		}
		if err := w.acquire(r.ctx); err != nil {
			r.fail(cancelErr(r.o, int(r.issued.Load()), err))
			return pinpool.Buffer{}, false
		}
		break
	}
	if r.stop.Load() {
		w.release()
		return pinpool.Buffer{}, false
	}
	for {
		buf, err := c.pool.TryGet(r.p.buffer)
		if err == nil {
			return buf, true
		}
		if !errors.Is(err, pinpool.ErrBudget) || !q.completeOldest() {
			break
		}
	}
	buf, err := c.pool.Get(r.ctx, r.p.buffer)
	if err != nil {
		// Stop the others before the slot is free for them.
		if e := r.ctx.Err(); e != nil {
			// Only the context's error is wrapped: a cancelled wait is not
			// a budget failure (the pool's error, which wraps ErrBudget,
			// is kept as text).
			r.fail(cancelErr(r.o, int(r.issued.Load()), fmt.Errorf("%w (waiting for a staging buffer: %v)", e, err)))
		} else {
			r.fail(fmt.Errorf("%w: %d bytes for the %s chunk at offset %d: %w", ErrStaging, r.p.buffer, r.o.dir, off, err))
		}
		w.release()
		return pinpool.Buffer{}, false
	}
	return buf, true
}
