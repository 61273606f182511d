package transfer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/pinpool/pinpool"
)

// inFlight is one staged chunk whose copy is queued on a stream: the
// chunk's range of the transfer, the staging buffer it is copied into or
// out of, and the event recorded after the copy.
type inFlight struct {
	ev  event
	off int
	n   int
	buf pinpool.Buffer
}

// minUnit is the smallest chunk a transfer is cut into when it is cut
// finer than ChunkSize to give every lane work.
const minUnit = 256 << 10

// unitFor is the chunk size of a staged transfer of n bytes: ChunkSize, or
// less when that leaves lanes without work, so that a transfer of a few
// chunks still copies on every lane (never below minUnit, in whole cache
// lines).
func unitFor(n, chunk, lanes int) int {
	u := (n + lanes - 1) / lanes
	u = (u + 63) &^ 63
	return max(min(u, chunk), min(minUnit, chunk))
}

// stagedRun is the shared state of one staged transfer: its chunks are
// claimed by index, and the first error stops everyone.
type stagedRun struct {
	c      *Copier
	ctx    context.Context
	o      op
	unit   int // chunk size (unitFor)
	chunks int64
	depth  int // chunks a lane keeps in flight before it completes its oldest
	tl     *timeline

	next   atomic.Int64 // next chunk index to claim
	issued atomic.Int64 // bytes whose copy was queued
	runState
}

// join runs a lane of r on a crew goroutine (see runState.joinLane).
func (r *stagedRun) join() { r.joinLane(r.lane) }

// claim returns the offset and length of the next chunk, or ok false when
// none is left or the transfer stopped (after recording ctx's error).
func (r *stagedRun) claim() (off, n int, ok bool) {
	if r.stop.Load() {
		return 0, 0, false
	}
	if err := r.ctx.Err(); err != nil {
		r.fail(cancelErr(r.o, int(r.issued.Load()), err))
		return 0, 0, false
	}
	i := r.next.Add(1) - 1
	if i >= r.chunks {
		return 0, 0, false
	}
	off = int(i) * r.unit
	return off, min(r.unit, len(r.o.host)-off), true
}

// staged runs the staging pipeline of one transfer. The transfer is cut
// into chunks of unitFor bytes, claimed in order by up to Workers lanes:
// the calling goroutine and the copier's standing lanes (crew) that are
// free to join. A lane owns each chunk it
// claims from start to end, the same way in both directions: it takes a
// window slot and a staging buffer, copies the chunk into the buffer (host
// to device), queues the asynchronous copy on the direction's next stream
// with an event after it, and goes on to its next chunk; once it holds
// depth chunks in flight it completes the oldest: it waits for the event,
// copies the chunk out of the buffer (device to host), and gives the
// buffer back to the pool and the slot to the window. So no lane waits for
// another, and a lane's CPU copies overlap the DMA of its earlier chunks
// and of the other lanes'.
//
// At most WindowBytes of staging is held, and a staging buffer goes back
// to the pool only after its copy has completed. A lane that would wait for
// a slot or a buffer while it holds chunks in flight completes one of them
// instead, so lanes never wait on each other's memory. On cancellation or
// failure no further chunk is issued, and staged returns only when every
// chunk in flight has completed.
func (c *Copier) staged(ctx context.Context, o op) error {
	n := len(o.host)
	k := max(c.opt.Workers, 1)
	if ok, err := c.coop(ctx, o, k); ok {
		return err
	}
	unit := unitFor(n, c.opt.ChunkSize, k)
	r := &stagedRun{c: c, ctx: ctx, o: o, unit: unit, chunks: int64((n + unit - 1) / unit)}
	k = min(k, int(r.chunks))
	r.depth = max(2, (c.opt.slots()+k-1)/k)
	r.tl = c.opt.timeline
	r.tl.reset()
	c.crew.offer(r, k-1)
	r.lane()
	r.endJoins()
	return r.err
}

// laneQueue is a lane's chunks in flight, oldest first.
type laneQueue struct {
	r    *stagedRun
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
func (r *stagedRun) lane() {
	c, o := r.c, r.o
	q := &laneQueue{r: r, held: make([]inFlight, 0, r.depth)}
	r.tl.mark(stepLane)
	defer func() {
		for q.completeOldest() {
		}
	}()
	for {
		off, m, ok := r.claim()
		if !ok {
			return
		}
		if len(q.held) >= r.depth {
			q.completeOldest()
		}
		buf, ok := r.stage(off, q)
		if !ok {
			return
		}
		r.tl.mark(stepStaged)
		b := buf.Bytes()[:m]
		if o.dir == HostToDevice {
			c.opt.writeStaging(b, o.host[off:off+m], false)
			r.tl.mark(stepCopied)
		}
		if !c.opt.concurrentIssue {
			c.issuing.lock()
		}
		ev, err := c.issue(c.stream(o.dir), o, PathStaged, off, b)
		if !c.opt.concurrentIssue {
			c.issuing.unlock()
		}
		if err != nil {
			r.fail(err)   // before the slot is free for the other lanes
			buf.Release() // issue waited for the stream where it had to
			c.win.release()
			return
		}
		r.tl.mark(stepIssued)
		r.issued.Add(int64(m))
		c.stats.chunks.Add(1)
		q.held = append(q.held, inFlight{ev: ev, off: off, n: m, buf: buf})
	}
}

// stage takes a window slot and a staging buffer for the chunk at off. While
// the lane holds chunks in flight it does not wait for either: it completes
// its oldest chunk, which gives back a slot and a buffer, and tries again.
// On failure the transfer is stopped and nothing new is held.
func (r *stagedRun) stage(off int, q *laneQueue) (pinpool.Buffer, bool) {
	c := r.c
	for !c.win.tryAcquire() {
		if q.completeOldest() {
			continue
		}
		if err := c.win.acquire(r.ctx); err != nil {
			r.fail(cancelErr(r.o, int(r.issued.Load()), err))
			return pinpool.Buffer{}, false
		}
		break
	}
	if r.stop.Load() {
		c.win.release()
		return pinpool.Buffer{}, false
	}
	for {
		buf, err := c.pool.TryGet(c.opt.ChunkSize)
		if err == nil {
			return buf, true
		}
		if !errors.Is(err, pinpool.ErrBudget) || !q.completeOldest() {
			break
		}
	}
	buf, err := c.pool.Get(r.ctx, c.opt.ChunkSize)
	if err != nil {
		// Stop the others before the slot is free for them.
		if e := r.ctx.Err(); e != nil {
			// Only the context's error is wrapped: a cancelled wait is not
			// a budget failure (the pool's error, which wraps ErrBudget,
			// is kept as text).
			r.fail(cancelErr(r.o, int(r.issued.Load()), fmt.Errorf("%w (waiting for a staging buffer: %v)", e, err)))
		} else {
			r.fail(fmt.Errorf("%w: %d bytes for the %s chunk at offset %d: %w", ErrStaging, c.opt.ChunkSize, r.o.dir, off, err))
		}
		c.win.release()
		return pinpool.Buffer{}, false
	}
	return buf, true
}

// complete waits for one chunk's copy, copies it out to the destination
// (device to host), and gives back its staging buffer and window slot. A
// chunk whose copy failed stops the transfer, and its buffer is retired by
// the pool (released with a failed fence), since the device's use of it is
// unknown.
func (r *stagedRun) complete(f inFlight) {
	c, o := r.c, r.o
	defer c.win.release()
	if err := c.settle(f.ev, f.buf, o.dir, f.off, f.n); err != nil {
		r.fail(err)
		return
	}
	r.tl.mark(stepSynced)
	if o.dir == DeviceToHost {
		// (Evicting the chunk from the caches afterwards, as the
		// cooperative path does, made large copies slower on the H200 VM:
		// 20.3 against 34.8 GB/s at 64 MiB, 25.6 against 43.6 at 256 MiB.)
		copyBytes(o.host[f.off:f.off+f.n], f.buf.Bytes()[:f.n], false)
	}
	f.buf.Release()
	c.events.put(f.ev)
	r.tl.mark(stepDone)
}

// settle waits for the event recorded after a staged copy of n bytes at
// offset off into or out of buf. When the copy failed, it retires buf (the
// device's use of it is unknown: the pool frees it instead of reusing it),
// destroys the event, and returns the copy error; otherwise the caller
// still owns buf and gives the event back. (Polling the event with
// cuEventQuery and yielding in between instead of cuEventSynchronize was
// measured on the H200 VM on 2026-11-30 and did no better: 3 MB device to
// host 13.2 against 14.0–14.4 GB/s.)
func (c *Copier) settle(ev event, buf pinpool.Buffer, d Direction, off, n int) error {
	err := ev.synchronize()
	if err == nil {
		return nil
	}
	err = copyErr(d, PathStaged, off, n, err)
	buf.ReleaseAfter(failedFence{err})
	c.events.drop(ev)
	return err
}
