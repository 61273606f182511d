package transfer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/pinpool/pinpool"
)

// inFlight is one staged chunk whose copy is queued on a stream.
type inFlight struct {
	ev    event
	off   int
	fence *stageFence    // host to device: the fence the buffer was released with
	buf   pinpool.Buffer // device to host: the buffer to copy out of, then release
}

// staged runs the staging pipeline of one transfer. The calling goroutine
// issues chunks: for each it takes a window slot and a staging buffer,
// (host to device) copies the chunk into the buffer with the workers,
// queues the asynchronous copy on the direction's next stream and records
// an event. A completer goroutine takes the chunks in issue order, waits for
// each event, (device to host) copies the chunk out to the destination, and
// gives back the slot. So the CPU copies of one chunk overlap the DMA of
// others, at most WindowBytes of staging is held, and a staging buffer is
// reused only after its copy completed: host-to-device buffers are released
// at once with ReleaseAfter(fence), device-to-host ones after the copy-out.
// On cancellation or failure no further chunk is issued and staged returns
// only when every chunk in flight has completed.
func (c *Copier) staged(ctx context.Context, o op) error {
	q := make(chan inFlight, cap(c.win.tokens))
	var stop atomic.Bool // set by the completer on a failed chunk
	var cerr error
	fin := make(chan struct{})
	go func() {
		defer close(fin)
		for f := range q {
			if err := c.complete(o, f); err != nil {
				if cerr == nil {
					cerr = err
				}
				stop.Store(true) // before the slot is free for the issuer
			}
			c.win.release()
		}
	}()
	ierr := c.issueChunks(ctx, o, q, &stop)
	close(q)
	<-fin
	switch {
	case cerr == nil:
		return ierr
	case ierr == nil || ierr == errStopped:
		return cerr
	}
	return errors.Join(ierr, cerr)
}

// errStopped makes the issuer return after the completer failed.
var errStopped = errors.New("transfer: stopped after a failed chunk")

// issueChunks is the issuing half of staged.
func (c *Copier) issueChunks(ctx context.Context, o op, q chan<- inFlight, stop *atomic.Bool) error {
	n, chunk := len(o.host), c.opt.ChunkSize
	for off := 0; off < n; off += chunk {
		if stop.Load() {
			return errStopped
		}
		if err := ctx.Err(); err != nil {
			return cancelErr(o, off, err)
		}
		if err := c.win.acquire(ctx); err != nil {
			return cancelErr(o, off, err)
		}
		if stop.Load() {
			c.win.release()
			return errStopped
		}
		buf, err := c.pool.Get(ctx, chunk)
		if err != nil {
			c.win.release()
			if e := ctx.Err(); e != nil {
				return cancelErr(o, off, errors.Join(e, err))
			}
			return fmt.Errorf("%w: %d bytes for the %s chunk at offset %d: %w", ErrStaging, chunk, o.dir, off, err)
		}
		m := min(chunk, n-off)
		b := buf.Bytes()[:m]
		if o.dir == HostToDevice {
			c.work.copy(b, o.host[off:off+m])
		}
		ev, err := c.issue(c.stream(o.dir), o, PathStaged, off, b)
		if err != nil {
			buf.Release() // issue waited for the stream where it had to
			c.win.release()
			return err
		}
		c.stats.chunks.Add(1)
		f := inFlight{ev: ev, off: off}
		if o.dir == HostToDevice {
			f.fence = &stageFence{ev: ev}
			buf.ReleaseAfter(f.fence)
		} else {
			f.buf = buf
		}
		q <- f
	}
	return nil
}

// complete is the completing half of staged for one chunk; the caller
// gives back its window slot.
func (c *Copier) complete(o op, f inFlight) error {
	if err := f.ev.synchronize(); err != nil {
		err = copyErr(o.dir, PathStaged, f.off, min(c.opt.ChunkSize, len(o.host)-f.off), err)
		if f.fence != nil {
			f.fence.fail(err)
		} else {
			f.buf.ReleaseAfter(failedFence{err})
		}
		c.events.drop(f.ev)
		return err
	}
	if f.fence != nil {
		f.fence.done()
	} else {
		m := min(c.opt.ChunkSize, len(o.host)-f.off)
		c.work.copy(o.host[f.off:f.off+m], f.buf.Bytes()[:m])
		f.buf.Release()
	}
	c.events.put(f.ev)
	return nil
}
