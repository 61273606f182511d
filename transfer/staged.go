package transfer

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
)

// Step 3 of a transfer: run, by its plan, cooperatively (coop.go) or chunked (below). The caller is
// a lane, offers the transfer to plan.lanes-1 standing lanes, and returns only when every copy
// issued has completed, also after a failure.

// staged copies the pageable memory of o through staging buffers.
func (c *Copier) staged(ctx context.Context, o op) error {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true)) // see copyIn
	lanes := c.lanes[o.dir]
	active := lanes.arrive()
	defer lanes.leave()
	p := planStaging(len(o.host), o.dir, active, lanes.asleep(), c.opt, c.tune)
	if p.mode == cooperative {
		if ok, err := c.coop(ctx, o, p); ok {
			return err
		}
		p = p.fallback() // no staging for all of it at once
	}
	return c.chunked(ctx, o, p)
}

// chunkedRun is the shared state of one chunked transfer: its chunks are claimed by index, and the
// first error stops every lane.
type chunkedRun struct {
	c   *Copier
	ctx context.Context
	o   op
	p   plan

	next      atomic.Int64 // next chunk index to claim
	issued    atomic.Int64 // bytes whose copy was queued
	completed atomic.Int64 // chunks completed

	// Device to host, the shared copy-outs (outShare), under shareMu (a leaf of the lock order);
	// nShares for the helpers to look at without the lock.
	shareMu sync.Mutex
	shares  []*outShare
	nShares atomic.Int32
	runState
}

// inFlight is one chunk whose copy is queued: its range, its staging and the event after its copy.
type inFlight struct {
	ev     event
	off, n int
	s      staging
}

// chunked runs a chunked transfer. A lane owns each chunk it claims from start to end: it takes a
// window slot and a staging buffer, copies the chunk in (host to device), issues its copy and event,
// and goes on to its next chunk, completing its oldest once it holds plan.depth. So no lane waits
// for another, and a lane's CPU copies overlap the DMA of its own earlier chunks and the others'.
func (c *Copier) chunked(ctx context.Context, o op, p plan) error {
	r := &chunkedRun{c: c, ctx: ctx, o: o, p: p}
	lanes := c.lanes[o.dir]
	lanes.offer(r, p.lanes-1)
	r.lane()
	lanes.withdraw(r) // every chunk is claimed: no lane need join now
	r.endJoins(lanes.endSpinFor())
	return r.err
}

func (r *chunkedRun) join() { r.joinLane(r.lane) }

// claim returns the next chunk's range, or ok false when none is left or the transfer stopped.
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

// completeOldest completes the lane's oldest chunk in flight, or reports false when it holds none.
func (q *laneQueue) completeOldest() bool {
	if len(q.held) == 0 {
		return false
	}
	f := q.held[0]
	q.held = append(q.held[:0], q.held[1:]...)
	q.r.complete(f)
	return true
}

// lane claims, stages, issues and completes chunks until none is left or the transfer stops.
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
			if o.dir == HostToDevice && !r.stop.Load() {
				q.demote()
			}
			return
		}
		if len(q.held) >= r.p.depth {
			q.completeOldest()
		}
		s, ok := c.stage(r.ctx, c.wins[o.dir], nil, r.p.buffer, q.completeOldest, r.ctx.Err, func(err error) {
			if errors.Is(err, ErrStaging) {
				r.fail(fmt.Errorf("transfer: the %s chunk at offset %d: %w", o.dir, off, err))
			} else {
				r.fail(cancelErr(o, int(r.issued.Load()), err))
			}
		})
		if !ok {
			return
		}
		b := s.buf.Bytes()[:m]
		// Cached stores: the chunks cycle through a window that stays in the last-level cache, where
		// streaming stores (and evicting the chunks after the copy) were slower, also for the first
		// and last round of chunks (BenchmarkStagedSizes).
		if o.dir == HostToDevice {
			if err := copyIn(b, o.host[off:off+m], false); err != nil {
				r.fail(err) // before the slot is free for the other lanes
				s.release(nil)
				return
			}
		}
		c.issuing[o.dir].lock()
		ev, unsure, err := c.issue(c.stream(o.dir), o, PathStaged, off, b)
		c.issuing[o.dir].unlock()
		if err != nil {
			r.fail(err) // before the slot is free for the other lanes
			if !unsure {
				err = nil // the copy is not running: the buffer is reusable
			}
			s.release(err)
			return
		}
		r.issued.Add(int64(m))
		c.stats.chunks.Add(1)
		q.held = append(q.held, inFlight{ev: ev, off: off, n: m, s: s})
	}
}

// demote moves the chunks a lane holds in flight, host to device, from its core's caches to the
// last-level cache once no chunk is left to claim: the DMA reads them last, and reads lines in a
// core's own cache about half as fast, while nothing else pushes them out of it. The lane has
// nothing else to do by then (BenchmarkFrameStream, 10 goroutines uploading; BenchmarkStagedSizes).
func (q *laneQueue) demote() {
	for _, f := range q.held {
		demoteHook(f.s.buf.Bytes()[:f.n])
	}
}

// demoteHook is demoteBytes; a test replaces it (before the copier starts) to see what is demoted.
var demoteHook = demoteBytes

// complete waits for one chunk's copy, copies it out (device to host), and gives back its staging
// and window slot. A failed copy stops the transfer and retires its buffer.
func (r *chunkedRun) complete(f inFlight) {
	c, o := r.c, r.o
	if err := c.wait(f.ev, o.dir, PathStaged, f.off, f.n); err != nil {
		r.fail(err) // before the slot is free for the other lanes
		f.s.release(err)
		return
	}
	if o.dir == DeviceToHost {
		// No eviction, unlike the cooperative mode's: the next copy into the buffer comes a window
		// later, and evicting made large copies slower. Once every chunk is claimed, lanes are
		// running out of work, and share the copy-out.
		dst, src := o.host[f.off:f.off+f.n], f.s.buf.Bytes()[:f.n]
		if r.p.lanes > 1 && r.next.Load() >= int64(r.p.chunks) {
			r.shareCopyOut(dst, src)
		} else {
			copyOut(dst, src, r.p.streamOut)
		}
	}
	f.s.release(nil)
	r.completed.Add(1)
}

// Device to host, a chunked transfer ends with the copy-out of the chunks that land last, while the
// lanes whose chunks landed earlier have nothing left to do. So once every chunk is claimed, a lane
// whose chunk lands shares its copy-out (outShare) in stripes, and the lanes that have finished
// their own chunks help with them until the transfer's last chunk is copied out.

// outShare is the copy-out of one landed chunk, in stripes that any lane may claim.
type outShare struct {
	dst, src []byte
	stripe   int
	stripes  int64
	next     atomic.Int64 // stripes claimed
	done     atomic.Int64 // stripes copied
	stream   bool         // copyOut's streaming stores
}

// work copies stripes of s until none is left to claim, and returns how many it copied.
func (s *outShare) work() (copied uint64) {
	for {
		i := s.next.Add(1) - 1
		if i >= s.stripes {
			return copied
		}
		lo := int(i) * s.stripe
		hi := min(lo+s.stripe, len(s.dst))
		copyOut(s.dst[lo:hi], s.src[lo:hi], s.stream)
		s.done.Add(1)
		copied++
	}
}

// shareCopyOut copies src out to dst with the help of the lanes that have finished, and returns
// once every byte is copied: the caller then owns src again.
func (r *chunkedRun) shareCopyOut(dst, src []byte) {
	// The smallest stripe worth claiming: the lanes that help come and go, and finer stripes share
	// the work more evenly than one per lane (BenchmarkStagedSizes, downloads).
	stripe := roundUp(max(r.c.tune.minStripe, 1), 4096)
	s := &outShare{dst: dst, src: src, stripe: stripe, stripes: int64(ceilDiv(len(src), stripe)), stream: r.p.streamOut}
	r.shareMu.Lock()
	r.shares = append(r.shares, s)
	r.shareMu.Unlock()
	r.nShares.Add(1)
	if testHookShare != nil {
		testHookShare(s)
	}
	s.work()
	// The helpers' last stripes: each is a short copy already under way.
	spinUntil(func() bool { return s.done.Load() == s.stripes }, -1)
	r.nShares.Add(-1)
	r.shareMu.Lock()
	r.shares = slices.DeleteFunc(r.shares, func(t *outShare) bool { return t == s })
	r.shareMu.Unlock()
}

// testHookShare, set by a test before the copier starts, runs in a lane that has published a shared
// copy-out, before it copies any of it.
var testHookShare func(s *outShare)

// openShare returns a shared copy-out with stripes left to claim, or nil.
func (r *chunkedRun) openShare() *outShare {
	if r.nShares.Load() == 0 {
		return nil
	}
	r.shareMu.Lock()
	defer r.shareMu.Unlock()
	for _, s := range r.shares {
		if s.next.Load() < s.stripes {
			return s
		}
	}
	return nil
}

// help copies out stripes of the other lanes' landed chunks until every chunk of the transfer is
// copied out or the transfer stops. A lane calls it once it has nothing of its own left, so it
// spins only while the last chunks, all claimed, land (BenchmarkStagedTrace).
func (r *chunkedRun) help() {
	for {
		var s *outShare
		spinUntil(func() bool {
			if r.stop.Load() || r.completed.Load() >= int64(r.p.chunks) {
				return true
			}
			s = r.openShare()
			return s != nil
		}, -1)
		if s == nil {
			return
		}
		r.c.stats.helped.Add(s.work())
	}
}
