package transfer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pinpool/pinpool"
)

// inFlight is one staged chunk whose copy is queued on a stream.
type inFlight struct {
	ev    event
	off   int
	n     int
	fence *stageFence    // host to device: the fence the buffer was released with
	buf   pinpool.Buffer // device to host: the buffer to copy out of, then release
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

	next   atomic.Int64 // next chunk index to claim
	issued atomic.Int64 // bytes whose copy was queued
	stop   atomic.Bool
	mu     sync.Mutex
	err    error
}

// fail records err (the first one wins) and stops the transfer.
func (r *stagedRun) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
	r.stop.Store(true)
}

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

// stage takes a window slot and a staging buffer for a chunk; on failure
// the transfer is stopped and nothing is held.
func (r *stagedRun) stage(off int) (pinpool.Buffer, bool) {
	c := r.c
	if err := c.win.acquire(r.ctx); err != nil {
		r.fail(cancelErr(r.o, int(r.issued.Load()), err))
		return pinpool.Buffer{}, false
	}
	if r.stop.Load() {
		c.win.release()
		return pinpool.Buffer{}, false
	}
	buf, err := c.pool.Get(r.ctx, c.opt.ChunkSize)
	if err != nil {
		// Stop the others before the slot is free for them.
		if e := r.ctx.Err(); e != nil {
			r.fail(cancelErr(r.o, int(r.issued.Load()), errors.Join(e, err)))
		} else {
			r.fail(fmt.Errorf("%w: %d bytes for the %s chunk at offset %d: %w", ErrStaging, c.opt.ChunkSize, r.o.dir, off, err))
		}
		c.win.release()
		return pinpool.Buffer{}, false
	}
	return buf, true
}

// lanes runs f on k goroutines, the calling one included, and waits.
func lanes(k int, f func()) {
	var wg sync.WaitGroup
	for range k - 1 {
		wg.Go(f)
	}
	f()
	wg.Wait()
}

// staged runs the staging pipeline of one transfer. The transfer is cut
// into chunks of unitFor bytes, claimed in order by up to Workers lanes
// (goroutines, the calling one among them), each of which handles whole
// chunks, so no lane ever waits for another:
//
//   - host to device, a lane takes a window slot and a staging buffer,
//     copies its chunk into the buffer (keeping it in the CPU cache, where
//     the DMA engine reads it), queues the asynchronous copy on the
//     direction's next stream with an event after it, and releases the
//     buffer to the pool with that event as its fence; a completer
//     goroutine waits for the events and gives back the window slots;
//   - device to host, the calling goroutine queues the chunks' copies into
//     staging buffers, in order, as window slots allow; the lanes wait for
//     each chunk's event, copy it out to the destination and give back the
//     buffer and the slot.
//
// At most WindowBytes of staging is held, and a staging buffer is reused
// only after its copy has completed. On cancellation or failure no further
// chunk is issued, and staged returns only when every chunk in flight has
// completed.
func (c *Copier) staged(ctx context.Context, o op) error {
	n := len(o.host)
	k := max(c.opt.Workers, 1)
	unit := unitFor(n, c.opt.ChunkSize, k)
	r := &stagedRun{c: c, ctx: ctx, o: o, unit: unit, chunks: int64((n + unit - 1) / unit)}
	k = min(k, int(r.chunks))
	q := make(chan inFlight, cap(c.win.tokens))
	if o.dir == HostToDevice {
		fin := make(chan struct{})
		go func() {
			defer close(fin)
			for f := range q {
				r.complete(f)
			}
		}()
		lanes(k, r.upload(q))
		close(q)
		<-fin
	} else {
		var wg sync.WaitGroup
		for range k {
			wg.Go(func() {
				for f := range q {
					r.complete(f)
				}
			})
		}
		r.download(q)
		close(q)
		wg.Wait()
	}
	return r.err
}

// upload returns a host-to-device lane.
func (r *stagedRun) upload(q chan<- inFlight) func() {
	return func() {
		c, o := r.c, r.o
		for {
			off, m, ok := r.claim()
			if !ok {
				return
			}
			buf, ok := r.stage(off)
			if !ok {
				return
			}
			b := buf.Bytes()[:m]
			copyBytes(b, o.host[off:off+m], c.opt.cacheStaging())
			ev, err := c.issue(c.stream(o.dir), o, PathStaged, off, b)
			if err != nil {
				r.fail(err)   // before the slot is free for the other lanes
				buf.Release() // issue waited for the stream where it had to
				c.win.release()
				return
			}
			r.issued.Add(int64(m))
			c.stats.chunks.Add(1)
			f := inFlight{ev: ev, off: off, n: m, fence: &stageFence{ev: ev}}
			buf.ReleaseAfter(f.fence)
			q <- f
		}
	}
}

// download is the device-to-host issuer, on the calling goroutine.
func (r *stagedRun) download(q chan<- inFlight) {
	c, o := r.c, r.o
	for {
		off, m, ok := r.claim()
		if !ok {
			return
		}
		buf, ok := r.stage(off)
		if !ok {
			return
		}
		ev, err := c.issue(c.stream(o.dir), o, PathStaged, off, buf.Bytes()[:m])
		if err != nil {
			r.fail(err)
			buf.Release()
			c.win.release()
			return
		}
		r.issued.Add(int64(m))
		c.stats.chunks.Add(1)
		q <- inFlight{ev: ev, off: off, n: m, buf: buf}
	}
}

// complete waits for one chunk's copy, finishes it (device to host: the
// copy out to the destination, unless the transfer has failed) and gives
// back its window slot.
func (r *stagedRun) complete(f inFlight) {
	c, o := r.c, r.o
	defer c.win.release()
	if err := f.ev.synchronize(); err != nil {
		err = copyErr(o.dir, PathStaged, f.off, f.n, err)
		if f.fence != nil {
			f.fence.fail(err)
		} else {
			f.buf.ReleaseAfter(failedFence{err})
		}
		c.events.drop(f.ev)
		r.fail(err)
		return
	}
	if f.fence != nil {
		f.fence.done()
	} else {
		copyBytes(o.host[f.off:f.off+f.n], f.buf.Bytes()[:f.n], false)
		f.buf.Release()
	}
	c.events.put(f.ev)
}
