package transfer

import (
	"context"
	"runtime"
	"sync/atomic"

	"github.com/pinpool/pinpool"
)

// Cooperative staging of small transfers. A transfer of a few megabytes
// cut into one chunk per lane spends most of its time in the driver, not
// in the copies: on the lent H200 VMs the 8 chunks of a 3 MB frame were
// all in staging 54 µs after the start, but their copies were queued only
// by 130 µs (about 13 µs a call while the other lanes waited in the
// driver for their own chunks), and the last one completed at 176 µs
// (BenchmarkStagedTimeline). So a small transfer is cut into a few pieces
// instead (coopPiece bytes each, one staging buffer and window slot each),
// every lane copies a slice of every piece, and the driver is called from
// one goroutine at a time and waited on by one:
//
//   - host to device, the lane that copies the last slice of a piece queues
//     the piece's copy and event; when the lanes are done, the caller waits
//     for the pieces' events;
//   - device to host, the caller queues every piece's copy and event first,
//     then waits for them in order and announces each one as it lands;
//     the lanes copy each piece's slices out once it is announced.

// Defaults of the cooperative path.
const (
	// coopPiece is the size of a piece: 1 MiB.
	coopPiece = 1 << 20
	// coopMax is the largest transfer staged cooperatively: 16 MiB.
	coopMax = 16 << 20
	// coopSlice is the smallest slice of a piece a lane copies.
	coopSlice = 64 << 10
)

// coopRun is the shared state of one cooperative transfer.
type coopRun struct {
	c   *Copier
	ctx context.Context
	o   op
	tl  *timeline

	piece, slice int // bytes per piece and per slice
	perPiece     int // slices per piece
	bufs         []pinpool.Buffer
	evs          []event // per piece, set once its copy is queued

	next    atomic.Int64 // next slice to claim
	left    []atomic.Int32
	landed  atomic.Int64 // device to host: pieces whose copy has completed
	issued  atomic.Int64 // bytes queued
	slices  int
	pieceOK []bool // the piece's copy was queued (under mu)
	runState
}

// coop runs o cooperatively and reports true, or reports false, having
// done nothing, when the transfer is not small or when the window or the
// pool cannot give it all its pieces at once (the chunked path then runs
// it, waiting as it must).
func (c *Copier) coop(ctx context.Context, o op, k int) (bool, error) {
	n := len(o.host)
	lim := c.opt.coopMax
	if lim == 0 {
		lim = coopMax
	}
	pieceSize := min(c.opt.ChunkSize, max(c.opt.coopPiece, 0))
	if pieceSize == 0 {
		pieceSize = min(c.opt.ChunkSize, coopPiece)
	}
	pieces := (n + pieceSize - 1) / pieceSize
	if k < 2 || n > lim || pieces > c.opt.slots()/2 {
		return false, nil
	}
	r := &coopRun{c: c, ctx: ctx, o: o, tl: c.opt.timeline, piece: pieceSize, evs: make([]event, pieces), left: make([]atomic.Int32, pieces), pieceOK: make([]bool, pieces)}
	if !r.take(pieces) {
		return false, nil
	}
	r.tl.reset()
	r.slice = max(coopSlice, (pieceSize+k-1)/k)
	r.slice = (r.slice + 4095) &^ 4095
	r.perPiece = (pieceSize + r.slice - 1) / r.slice
	for p := range pieces {
		end := min(n, (p+1)*pieceSize)
		cnt := (end - p*pieceSize + r.slice - 1) / r.slice
		r.left[p].Store(int32(cnt))
		r.slices = p*r.perPiece + cnt // slices are numbered piece by piece
	}
	r.finish(k)
	return true, r.err
}

// take gets a window slot and a staging buffer for every piece without
// waiting, or nothing.
func (r *coopRun) take(pieces int) bool {
	c := r.c
	for range pieces {
		if !c.win.tryAcquire() {
			r.giveBack()
			return false
		}
		buf, err := c.pool.TryGet(c.opt.ChunkSize)
		if err != nil {
			c.win.release()
			r.giveBack()
			return false
		}
		r.bufs = append(r.bufs, buf)
	}
	return true
}

// giveBack releases the buffers and slots taken (no copy uses them).
func (r *coopRun) giveBack() {
	for _, b := range r.bufs {
		b.Release()
		r.c.win.release()
	}
	r.bufs = nil
}

// finish runs the transfer on the calling goroutine and k-1 crew lanes,
// then waits for every queued copy and gives back the buffers and slots.
func (r *coopRun) finish(k int) {
	c, o := r.c, r.o
	pieces := len(r.bufs)
	if o.dir == DeviceToHost {
		c.issuing.lock()
		for p := range pieces {
			if !r.queue(p) {
				break
			}
		}
		c.issuing.unlock()
	}
	c.crew.offer(r, k-1)
	// Pieces before settled have completed and are the caller's to give
	// back; a piece that failed has been retired with its event.
	settled, failed := 0, -1
	if o.dir == DeviceToHost {
		for p := range pieces {
			if !r.pieceOK[p] || r.stop.Load() {
				break
			}
			if err := c.settle(r.evs[p], r.bufs[p], o.dir, p*r.piece, r.pieceLen(p)); err != nil {
				r.fail(err)
				failed = p
				break
			}
			r.tl.mark(stepSynced)
			settled++
			r.landed.Add(1)
		}
		r.landed.Store(int64(pieces) + 1) // wake any lane still waiting: done or failed
	}
	r.lane()
	r.endJoins()
	// Every piece whose copy was queued must complete before its buffer
	// goes back.
	for p, b := range r.bufs {
		switch {
		case p == failed:
		case !r.pieceOK[p]:
			b.Release()
		case p >= settled:
			if err := c.settle(r.evs[p], b, o.dir, p*r.piece, r.pieceLen(p)); err != nil {
				r.fail(err)
				break
			}
			r.tl.mark(stepSynced)
			fallthrough
		default:
			b.Release()
			c.events.put(r.evs[p])
		}
		c.win.release()
	}
}

// pieceLen is the length of piece p.
func (r *coopRun) pieceLen(p int) int { return min(r.piece, len(r.o.host)-p*r.piece) }

// queue queues piece p's copy and its event; the caller holds the issue
// lock. It reports false after a failure.
func (r *coopRun) queue(p int) bool {
	c, o := r.c, r.o
	off, m := p*r.piece, r.pieceLen(p)
	ev, err := c.issue(c.stream(o.dir), o, PathStaged, off, r.bufs[p].Bytes()[:m])
	if err != nil {
		r.fail(err)
		return false
	}
	r.mu.Lock()
	r.evs[p], r.pieceOK[p] = ev, true
	r.mu.Unlock()
	r.tl.mark(stepIssued)
	r.issued.Add(int64(m))
	c.stats.chunks.Add(1)
	return true
}

// lane copies slices until none is left or the transfer stops.
func (r *coopRun) lane() {
	c, o := r.c, r.o
	r.tl.mark(stepLane)
	for !r.stop.Load() {
		if err := r.ctx.Err(); err != nil {
			r.fail(cancelErr(o, int(r.issued.Load()), err))
			return
		}
		i := int(r.next.Add(1) - 1)
		if i >= r.slices {
			return
		}
		p, s := i/r.perPiece, i%r.perPiece
		lo := p*r.piece + s*r.slice
		hi := min(lo+r.slice, p*r.piece+r.pieceLen(p))
		if lo >= hi {
			continue // past the end of a short last piece
		}
		b := r.bufs[p].Bytes()[lo-p*r.piece : hi-p*r.piece]
		if o.dir == HostToDevice {
			c.opt.writeStaging(b, o.host[lo:hi], true)
			r.tl.mark(stepCopied)
			if r.left[p].Add(-1) == 0 {
				c.issuing.lock()
				r.queue(p)
				c.issuing.unlock()
			}
			continue
		}
		for r.landed.Load() <= int64(p) {
			runtime.Gosched()
		}
		if r.stop.Load() {
			return
		}
		copyBytes(o.host[lo:hi], b, false)
		if !c.opt.noEvict {
			evictBytes(b) // the next DMA into it need not chase these lines
		}
		r.tl.mark(stepDone)
	}
}

// join runs a lane of r on a crew goroutine (see runState.joinLane).
func (r *coopRun) join() { r.joinLane(r.lane) }
