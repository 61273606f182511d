package transfer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
)

// Streams and files. Data that is not in memory yet (a file, a socket, a decoder's output) moves in
// pieces of at most ChunkSize bytes, each through one pinned staging buffer held under one slot of
// the copier's window: read straight into the buffer, then one asynchronous copy to the device (or
// the other way round). Several pieces are in flight at once, so reading, staging and DMA overlap,
// and the pinned memory held stays within the window whatever the size of the data.
//
// Nothing a reader, writer or file says is trusted: every count is checked before it moves a byte
// (readChecked, writeChecked), the pieces are computed, never listed, so that a huge length
// allocates nothing, and the device range is checked before the first piece.

// piece is one part of a stream transfer: pos bytes from the start of the device range, n bytes
// long; for files, at file offset off.
type piece struct {
	pos, off int64
	n        int
}

// pieces cuts [off, off+n) of a file at multiples of chunk in file offsets, so that every piece but
// the first and the last is aligned for direct I/O, and each, its ends rounded out to the page
// size, fits one staging buffer of chunk bytes. Piece i is computed on demand.
type pieces struct {
	off, n int64
	chunk  int64
	count  int
}

func newPieces(off, n int64, chunk int) pieces {
	c := int64(chunk)
	first, last := off/c, (off+n-1)/c
	return pieces{off: off, n: n, chunk: c, count: int(last - first + 1)}
}

// at returns piece i (0 <= i < count).
func (p pieces) at(i int) piece {
	start := p.off
	if i > 0 {
		start = (p.off/p.chunk + int64(i)) * p.chunk
	}
	end := min((start/p.chunk+1)*p.chunk, p.off+p.n)
	return piece{pos: start - p.off, off: start, n: int(end - start)}
}

// staging is one piece's pinned buffer and its window slot.
type staging struct {
	w   *window
	buf pinpool.Buffer
}

// release gives the buffer and the slot back; after a copy of it failed with err (not nil), the
// buffer goes to the pool to retire: the device's use of it is unknown.
func (s staging) release(err error) {
	if err != nil {
		s.buf.ReleaseAfter(failedFence{err})
	} else {
		s.buf.Release()
	}
	s.w.release()
}

// live returns ctx's error, or ErrClosed once Close has begun: a stream transfer ends at its next
// piece then, so that Close does not wait for a reader that may never end.
func (c *Copier) live(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	return nil
}

// pieceQueue is one lane's pieces whose asynchronous copies are issued, oldest first.
type pieceQueue struct {
	c    *Copier
	dir  Direction
	dev  cuda.DevicePtr // the transfer's
	held []queued
	land func(f queued, err error) // each piece in order once its copy has completed (err: its failure)
}

// queued is piece i in flight, pos bytes into the transfer: its staging, the event after its copy,
// its bytes (short: a read failed in it).
type queued struct {
	i, pos int
	s      staging
	ev     event
	data   []byte
	short  bool
}

// stage takes a slot of w (or of spare, when not nil, while w has none free) and a staging buffer
// of size bytes for a lane. While the lane holds copies in flight it completes its oldest (oldest;
// false when it holds none) instead of waiting for either, so that a lane never waits on its own
// staging. live is asked once the slot is held whether the transfer goes on. On failure stage
// calls fail with ctx's error, live's or the pool's (wrapping ErrStaging) before it gives the slot
// back, so that the lanes waiting for it find the transfer stopped, and reports false.
func (c *Copier) stage(ctx context.Context, w, spare *window, size int, oldest func() bool, live func() error, fail func(error)) (staging, bool) {
	for !w.tryAcquire() {
		if spare != nil && spare.tryAcquire() {
			w = spare
			break
		}
		if !oldest() {
			if err := w.acquire(ctx); err != nil {
				fail(err)
				return staging{}, false
			}
			break
		}
	}
	err := live()
	for err == nil {
		buf, e := c.pool.TryGet(size)
		if errors.Is(e, pinpool.ErrBudget) && oldest() {
			continue
		} else if e != nil {
			buf, e = c.pool.Get(ctx, size)
		}
		switch {
		case e == nil:
			return staging{w, buf}, true
		case ctx.Err() != nil:
			// A cancelled wait is not a budget failure: the pool's error is kept as text only.
			err = fmt.Errorf("%w (waiting for a staging buffer: %v)", ctx.Err(), e)
		default:
			err = fmt.Errorf("%w: %d bytes: %w", ErrStaging, size, e)
		}
	}
	fail(err)
	w.release()
	return staging{}, false
}

// issue issues f's copy between f.data (in s) and the device, f.pos into the transfer. s is the
// queue's from then on: on failure it is given back at once.
func (q *pieceQueue) issue(s staging, f queued) error {
	ev, unsure, err := q.c.issue(q.c.stream(q.dir), op{q.dir, q.dev, f.data}, PathPinned, f.pos, f.data)
	if err != nil {
		if unsure {
			s.release(err)
		} else {
			s.release(nil) // the copy is not running: the buffer is reusable
		}
		return err
	}
	q.c.stats.chunks.Add(1)
	f.s, f.ev = s, ev
	q.held = append(q.held, f)
	return nil
}

// landOldest waits for the oldest piece's copy, hands it to land, and gives its staging back (a
// buffer whose copy failed is retired); it reports false when none is in flight.
func (q *pieceQueue) landOldest() bool {
	if len(q.held) == 0 {
		return false
	}
	f := q.held[0]
	q.held = q.held[1:]
	err := q.c.wait(f.ev, q.dir, PathPinned, f.pos, len(f.data))
	q.land(f, err)
	f.s.release(err)
	return true
}

// progress records which pieces of a transfer are complete, beside the first error and the stop
// flag (runState, whose mu guards the rest). Pieces complete out of order, but only as many at once
// as lanes run, so it holds the bytes of the unbroken prefix and the few complete pieces beyond it:
// nothing per piece of the transfer.
type progress struct {
	runState
	prefix      int           // pieces complete from the start
	prefixBytes int64         // their bytes
	ahead       map[int]int64 // complete pieces after the prefix: their bytes
	partialAt   int           // the piece that arrived in part; -1: none
	broken      bool          // the prefix ended in that piece
}

func newProgress() *progress { return &progress{ahead: map[int]int64{}, partialAt: -1} }

// add records that piece i arrived, k bytes: whole, or (part) only its first k bytes, where the
// count ends.
func (p *progress) add(i int, k int, part bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken || i < p.prefix {
		return
	}
	if part {
		p.partialAt = i
	}
	p.ahead[i] = int64(k)
	for !p.broken {
		b, ok := p.ahead[p.prefix]
		if !ok {
			return
		}
		delete(p.ahead, p.prefix)
		p.broken = p.prefix == p.partialAt
		p.prefix++
		p.prefixBytes += b
	}
}

// arrived is the bytes of the complete pieces from the start, up to the first one that is not.
func (p *progress) arrived() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.prefixBytes
}

// move moves the transfer's pieces between staging and the device on the caller's goroutine and
// up to lanes-1 standing lanes (the same lanes as a staged copy's), each taking the next piece,
// until all are done or one fails or ctx ends. More lanes than the direction's own are borrowed
// from the other direction, which takes the offer only while idle, and so are the free slots of
// its window, so that the lanes have staging to read into while their pieces' copies are in
// flight. Each lane keeps its pieces' copies in flight (pieceQueue) while it fills the next staging
// buffer: fill returns the piece's bytes in buf (host to device, read into it; with an error, what
// it read before); drain, when not nil, takes them once they landed (device to host) and returns
// how many it took. With one lane the pieces go in order.
func (run *streamRun) move(lanes int, fill func(pc piece, buf []byte) ([]byte, error), drain func(pc piece, b []byte) (int, error)) {
	c, ctx, d, dev, ps := run.c, run.ctx, run.dir, run.dev, run.ps
	var spare *window
	slots := c.opt.Slots()
	if lanes > c.opt.Lanes && fileBorrow.window {
		spare, slots = c.wins[1-d], 2*slots
	}
	var next atomic.Int64
	run.lane = func() {
		q := &pieceQueue{c: c, dir: d, dev: dev, land: func(f queued, err error) {
			k := 0 // a piece whose copy failed did not arrive
			switch {
			case err == nil && f.short:
				run.add(f.i, len(f.data), true)
			case err == nil && drain == nil:
				run.add(f.i, len(f.data), false)
			case err == nil && !run.stop.Load(): // else not taken: the transfer ends before it
				if k, err = drain(ps.at(f.i), f.data); err == nil {
					run.add(f.i, k, false)
				}
			}
			if err != nil {
				if k > 0 {
					run.add(f.i, k, true)
				}
				run.fail(err)
			}
		}}
		defer func() {
			for q.landOldest() {
			}
		}()
		for !run.stop.Load() {
			i := int(next.Add(1) - 1)
			if i >= ps.count {
				return
			}
			pc := ps.at(i)
			for run.depth > 0 && len(q.held) >= run.depth && q.landOldest() {
			}
			s, ok := c.stage(ctx, c.wins[d], spare, c.opt.ChunkSize, q.landOldest, func() error { return c.live(ctx) }, run.fail)
			if !ok {
				return
			}
			// A failure stops the loop; what was filled before a read error still goes, and ends the
			// count.
			b, ferr := fill(pc, s.buf.Bytes())
			if ferr != nil {
				run.fail(ferr)
			}
			if ferr != nil && len(b) == 0 {
				s.release(nil)
			} else if err := q.issue(s, queued{i: i, pos: int(pc.pos), data: b, short: ferr != nil}); err != nil {
				run.fail(err)
			}
		}
	}
	n := min(lanes, slots, ps.count) - 1
	own := min(n, c.opt.Lanes-1)
	c.lanes[d].offer(run, own)
	c.lanes[1-d].offer(run, n-own)
	run.lane()
	c.lanes[d].withdraw(run)
	c.lanes[1-d].withdraw(run)
	run.endJoins(0)
}

func (run *streamRun) join() { run.joinLane(run.lane) }

// caught runs fn, the caller's reader or writer, turning a panic into an error wrapping
// ErrCallbackPanic: it may run on a lane of the copier, where a panic would end the process.
func caught(what string, fn func() (int, error)) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("%w: %s: %v", ErrCallbackPanic, what, r)
		}
	}()
	return fn()
}

// rangedDevice is a device that can tell the allocation an address lies in (cuMemGetAddressRange),
// so that a stream transfer that would run past it is refused before it starts.
type rangedDevice interface {
	addressRange(p cuda.DevicePtr) (base cuda.DevicePtr, size uint64, err error)
}

// streamRun is one stream or file transfer under way, counted in Stats as one transfer when it
// ends; standing lanes join it through join.
type streamRun struct {
	*progress
	c     *Copier
	ctx   context.Context
	dir   Direction
	dev   cuda.DevicePtr
	ps    pieces
	t0    time.Time
	lane  func() // set by move
	depth int    // the most pieces a lane keeps in flight; zero: as the window allows
}

// startStream checks the arguments of a stream or file transfer of n bytes between the device at
// dev and offset off of its host side (isNil: its reader, writer or file, named arg, is nil), before
// anything is allocated: off+n must fit an int64, dev+n the address space and, where the device can
// tell, the allocation dev lies in. It begins the transfer on the copier (Close waits for it), or
// returns nil and no error when there is nothing to move; else the caller calls finish.
func (c *Copier) startStream(ctx context.Context, dir Direction, what, arg string, isNil bool, dev cuda.DevicePtr, off, n int64) (*streamRun, error) {
	switch {
	case n < 0 || off < 0:
		return nil, fmt.Errorf("%w: %s: offset %d, length %d", ErrInvalidRange, what, off, n)
	case isNil:
		return nil, fmt.Errorf("%w: %s: nil %s", ErrInvalidRange, what, arg)
	case n == 0:
		return nil, nil
	case off > math.MaxInt64-n:
		return nil, fmt.Errorf("%w: %s: offset %d + length %d overflows", ErrInvalidRange, what, off, n)
	case uint64(dev) > math.MaxUint64-uint64(n):
		return nil, fmt.Errorf("%w: %s: device address %#x + length %d overflows", ErrInvalidRange, what, uint64(dev), n)
	}
	if rd, ok := c.dev.(rangedDevice); ok {
		// A query the driver refuses (an address it does not know) leaves the check to the copies,
		// which fail on such an address.
		if base, size, err := rd.addressRange(dev); err == nil && uint64(dev-base)+uint64(n) > size {
			return nil, fmt.Errorf("%w: %s: %d bytes at device address %#x run past its allocation (%d bytes at %#x)", ErrInvalidRange, what, n, uint64(dev), size, uint64(base))
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := c.begin(); err != nil {
		return nil, err
	}
	return &streamRun{progress: newProgress(), c: c, ctx: ctx, dir: dir, dev: dev, ps: newPieces(off, n, c.opt.ChunkSize), t0: time.Now()}, nil
}

// finish ends the transfer on the copier and returns moved, the bytes that arrived, and the first
// error, said with what and the count. In Stats it is one transfer of its bytes under PathStream
// when it moved them all, else a failure or a cancellation.
func (r *streamRun) finish(moved int64, what string) (int64, error) {
	r.mu.Lock()
	err := r.err
	r.mu.Unlock()
	if err == nil && moved != r.ps.n {
		err = fmt.Errorf("%w: %d of %d bytes moved without an error", ErrContract, moved, r.ps.n)
	}
	if err != nil {
		err = fmt.Errorf("transfer: %s: %d of %d bytes arrived: %w", what, moved, r.ps.n, err)
	}
	r.c.stats.count(r.ctx, err, r.dir, PathStream, int(moved), time.Since(r.t0))
	r.c.end()
	return moved, err
}
