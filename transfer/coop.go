package transfer

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/pinpool/pinpool"
)

// The cooperative mode (see mode). Each chunk's copy is issued by one goroutine under the issue
// lock: host to device, the lane that copies the chunk's last stripe, and the caller waits for the
// events once the lanes are done; device to host, the caller, every chunk first, and the first lane
// to need a chunk waits for its event, the others for that lane. The caller waiting for the chunks
// in order before the copy-out made a paced stream's downloads slower (BenchmarkPacedFrames).
//
// Device to host, back to back (plan.backToBack), the staging is evicted from the CPU caches after
// the copy-out. When the transfer is the only one staging in its direction (plan.streamOut), its
// caller does not wait for that (the handoff): it returns once every stripe is copied out, and the
// last of the transfer's goroutines to finish evicts the caller's stripes and gives the staging
// back (lastOut). An eviction takes about as long as the copy-out; waiting for it had the caller
// wait for the last chunk twice (BenchmarkFrameStream, a downloaded frame).

// testHookHandoff, set by a test before the copier starts, runs in a download that may hand off: on
// its caller before its own lane (caller true), and on each joined lane after its stripes, before
// it counts itself out as an owner; so a test makes the handoff happen whatever the scheduling.
var testHookHandoff func(r *coopRun, caller bool)

// coopRun is the shared state of one cooperative transfer.
type coopRun struct {
	c   *Copier
	ctx context.Context
	o   op
	p   plan

	bufs    []pinpool.Buffer // plan.buffers staging buffers, plan.perBuffer chunks each
	evs     []event          // per chunk, set once its copy is issued
	state   []atomic.Int32   // per chunk: zero, chunkQueued, chunkWaited or chunkSettled
	retired []error          // per buffer: the failure of a copy that used it (under mu)
	left    []atomic.Int32   // host to device: stripes of each chunk not yet copied in
	next    atomic.Int64     // next stripe to claim
	issued  atomic.Int64     // bytes issued

	// The handoff (see above): the stripes copied out, the caller and the joined lanes still at
	// work (the last one runs lastOut), and the caller's stripes, for lastOut to evict.
	copied   atomic.Int64
	owners   atomic.Int32
	leftover [][]byte
	runState
}

// A chunk's state after not issued (zero): issued, waited for by one goroutine, completed or failed.
const (
	chunkQueued int32 = iota + 1
	chunkWaited
	chunkSettled
)

// coop runs o cooperatively by plan p and reports true, or reports false, having done nothing, when
// the window or the pool cannot give it all its staging at once.
func (c *Copier) coop(ctx context.Context, o op, p plan) (bool, error) {
	r := &coopRun{c: c, ctx: ctx, o: o, p: p, evs: make([]event, p.chunks), state: make([]atomic.Int32, p.chunks), retired: make([]error, p.buffers), left: make([]atomic.Int32, p.chunks)}
	if !r.take() {
		return false, nil
	}
	r.owners.Store(1)
	for i := range p.chunks {
		r.left[i].Store(int32(p.stripesOf(i)))
	}
	r.run()
	return true, r.err
}

// take gets a window slot and a staging buffer for each of the plan's buffers without waiting, or
// nothing.
func (r *coopRun) take() bool {
	c, w := r.c, r.c.wins[r.o.dir]
	for range r.p.buffers {
		if !w.tryAcquire() {
			r.finish() // no copy uses them: the buffers and slots taken go back
			return false
		}
		buf, err := c.pool.TryGet(r.p.buffer)
		if err != nil {
			w.release()
			r.finish()
			return false
		}
		r.bufs = append(r.bufs, buf)
	}
	return true
}

// staging is the part of the staging buffers that holds bytes [lo, hi) of chunk i.
func (r *coopRun) staging(i, lo, hi int) []byte {
	base := i * r.p.chunk
	at := (i % r.p.perBuffer) * r.p.chunk
	return r.bufs[i/r.p.perBuffer].Bytes()[at+lo-base : at+hi-base]
}

// run runs the transfer on the calling goroutine and plan.lanes-1 standing lanes, then waits for
// every issued copy and gives back the staging.
func (r *coopRun) run() {
	c, o, p := r.c, r.o, r.p
	// Lanes asleep are offered the transfer first, to wake while the copies are issued (backToBack).
	if !p.backToBack {
		c.lanes[o.dir].offer(r, p.lanes-1)
	}
	if o.dir == DeviceToHost {
		c.issuing[o.dir].lock()
		for i := range p.chunks {
			if !r.queue(i) {
				break
			}
		}
		c.issuing[o.dir].unlock()
	}
	if p.backToBack {
		c.lanes[o.dir].offer(r, p.lanes-1)
	}
	if p.handoff && testHookHandoff != nil {
		testHookHandoff(r, true)
	}
	r.laneOf(true)
	c.lanes[o.dir].withdraw(r) // every stripe is claimed: no lane need join now
	spin := c.lanes[o.dir].endSpinFor()
	if p.handoff && r.handOff(spin) {
		return
	}
	r.endJoins(spin)
	r.lastOut() // the handoff did not happen
}

// handOff spins, after the caller's own lane, for up to spin until every stripe is copied out.
// Copied out, it closes the transfer to lanes that have not joined, leaves the eviction and the
// staging to the lanes still at work (or does it, if none is), and reports true: the caller may
// return. Stopped, or with stripes still being copied (a lane that lost its processor), it reports
// false, and the caller waits for the lanes, asleep after the same spin, and finishes as usual.
func (r *coopRun) handOff(spin time.Duration) bool {
	if !spinUntil(func() bool { return r.copied.Load() == int64(r.p.stripes) || r.stop.Load() }, spin) || r.stop.Load() {
		return false
	}
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	if r.owners.Add(-1) == 0 {
		r.lastOut()
	}
	return true
}

// lastOut evicts the caller's stripes and gives back the staging: the work of the last of the
// transfer's goroutines to finish.
func (r *coopRun) lastOut() {
	for _, b := range r.leftover {
		evictBytes(b)
	}
	r.finish()
}

// finish waits for every chunk whose copy was issued and that no lane waited for, then gives back
// the buffers and the window slots. A buffer that held a failed copy is retired (released with a
// failed fence, so that the pool never reuses it), once no copy of its other chunks runs.
func (r *coopRun) finish() {
	c := r.c
	for i := range r.p.chunks {
		if r.state[i].Load() == chunkQueued {
			r.settle(i)
		}
	}
	for b, buf := range r.bufs {
		if err := r.retired[b]; err != nil {
			buf.ReleaseAfter(failedFence{err})
		} else {
			buf.Release()
		}
		c.wins[r.o.dir].release()
	}
}

// settle waits for chunk i's copy, gives its event back and marks the chunk settled. When the copy
// failed, the event is destroyed, the chunk's buffer marked for retirement and the transfer
// stopped.
func (r *coopRun) settle(i int) {
	defer r.state[i].Store(chunkSettled)
	lo, hi := r.p.chunkRange(i)
	err := r.c.wait(r.evs[i], r.o.dir, PathStaged, lo, hi-lo)
	if err == nil {
		return
	}
	r.mu.Lock()
	if b := i / r.p.perBuffer; r.retired[b] == nil {
		r.retired[b] = err
	}
	r.mu.Unlock()
	r.fail(err)
}

// await waits until chunk i's copy has landed, waiting for its event itself when no other lane
// does, and reports false when the transfer stopped meanwhile.
func (r *coopRun) await(i int) bool {
	spinUntil(func() bool {
		s := r.state[i].Load()
		if s == chunkQueued && r.state[i].CompareAndSwap(chunkQueued, chunkWaited) {
			r.settle(i)
			return true
		}
		return s == chunkSettled || r.stop.Load()
	}, -1)
	return !r.stop.Load()
}

// queue issues chunk i's copy and its event; the caller holds the issue lock. It reports false
// after a failure.
func (r *coopRun) queue(i int) bool {
	c, o := r.c, r.o
	lo, hi := r.p.chunkRange(i)
	ev, _, err := c.issue(c.stream(o.dir), o, PathStaged, lo, r.staging(i, lo, hi))
	if err != nil {
		r.fail(err)
		return false
	}
	r.evs[i] = ev
	r.state[i].Store(chunkQueued)
	r.issued.Add(int64(hi - lo))
	c.stats.chunks.Add(1)
	return true
}

// laneOf copies stripes until none is left or the transfer stops; caller tells whether it runs on
// the transfer's caller.
func (r *coopRun) laneOf(caller bool) {
	o := r.o
	r.c.stats.lanes.Add(1)
	for !r.stop.Load() {
		s := int(r.next.Add(1) - 1)
		if s >= r.p.stripes {
			return
		}
		// After the claim: a lane with no stripe left must not fail a transfer whose caller may
		// have returned (handOff).
		if err := r.ctx.Err(); err != nil {
			r.fail(cancelErr(o, int(r.issued.Load()), err))
			return
		}
		i, lo, hi := r.p.stripeRange(s)
		b := r.staging(i, lo, hi)
		if o.dir == HostToDevice {
			// Streaming stores: the DMA reads this chunk right away, and reads memory still in the
			// cores' caches far slower.
			if err := copyIn(b, o.host[lo:hi], true); err != nil {
				r.fail(err)
				return
			}
			if r.left[i].Add(-1) == 0 {
				r.c.issuing[o.dir].lock()
				r.queue(i)
				r.c.issuing[o.dir].unlock()
			}
			continue
		}
		if !r.await(i) {
			return
		}
		copyOut(o.host[lo:hi], b, r.p.streamOut)
		r.copied.Add(1) // before the eviction, which the caller of a handoff does not wait for
		if r.p.handoff && caller {
			r.leftover = append(r.leftover, b)
		} else if r.p.backToBack {
			evictBytes(b)
		}
	}
}

// join runs a lane of r on a standing lane. The lane is one of the transfer's owners: in a handoff,
// the last owner to finish gives back the staging (without one, the caller stays an owner).
func (r *coopRun) join() {
	if !r.enter(&r.owners) {
		return
	}
	r.laneOf(false)
	r.exit()
	if r.p.handoff && testHookHandoff != nil {
		testHookHandoff(r, false)
	}
	if r.owners.Add(-1) == 0 {
		r.c.stats.handedOff.Add(1)
		r.lastOut()
	}
}
