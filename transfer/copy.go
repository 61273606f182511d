package transfer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
)

// op is one transfer: its direction, device address and host memory.
type op struct {
	dir  Direction
	dev  cuda.DevicePtr
	host []byte
}

// ToDevice copies src to the device at dst and returns when the bytes are
// there. The path is chosen by the memory and its size (see Path): memory
// registered with Register or already pinned goes directly as
// asynchronous copies; pageable memory smaller than Options.DirectBelow goes
// through the driver's synchronous copy; larger pageable memory is staged.
// When ctx ends during a staged copy, no further chunk is issued, the chunks
// in flight are waited for, and the error wraps ctx.Err(); part of dst may
// then have been written. A nil ctx never ends.
func (c *Copier) ToDevice(ctx context.Context, dst cuda.DevicePtr, src []byte) error {
	return c.run(ctx, op{HostToDevice, dst, src}, false)
}

// FromDevice copies len(dst) bytes from the device at src into dst and
// returns when they are there. Paths and cancellation are those of
// ToDevice; after an error or cancellation dst may be partly written.
func (c *Copier) FromDevice(ctx context.Context, dst []byte, src cuda.DevicePtr) error {
	return c.run(ctx, op{DeviceToHost, src, dst}, false)
}

// ToDeviceBuffer copies the bytes of a live pool buffer to the device at
// dst with one asynchronous copy (PathPinned), skipping the pinned-memory
// detection of ToDevice. The buffer stays the caller's.
func (c *Copier) ToDeviceBuffer(ctx context.Context, dst cuda.DevicePtr, buf pinpool.Buffer) error {
	b, err := bufferBytes(buf)
	if err != nil {
		return err
	}
	return c.run(ctx, op{HostToDevice, dst, b}, true)
}

// FromDeviceBuffer copies buf.Len() bytes from the device at src into a
// live pool buffer with one asynchronous copy (PathPinned).
func (c *Copier) FromDeviceBuffer(ctx context.Context, buf pinpool.Buffer, src cuda.DevicePtr) error {
	b, err := bufferBytes(buf)
	if err != nil {
		return err
	}
	return c.run(ctx, op{DeviceToHost, src, b}, true)
}

// run executes one transfer between begin and end, so that Close waits for
// it.
func (c *Copier) run(ctx context.Context, o op, pinned bool) error {
	if err := c.begin(); err != nil {
		return err
	}
	defer c.end()
	return c.execute(ctx, o, pinned)
}

func bufferBytes(buf pinpool.Buffer) ([]byte, error) {
	b := buf.Bytes()
	if !buf.Valid() {
		return nil, fmt.Errorf("transfer: pool buffer: %w", pinpool.ErrReleased)
	}
	return b, nil
}

// PathOf reports the path a copy of b (to or from the device) would take
// now.
func (c *Copier) PathOf(b []byte) Path {
	p, r := c.choose(b, false)
	if r != nil {
		r.done()
	}
	return p
}

// choose picks the path for host memory b. For PathRegistered it returns
// the registration with a use taken; the caller calls done.
func (c *Copier) choose(b []byte, pinned bool) (Path, *Registration) {
	if pinned {
		return PathPinned, nil
	}
	if r := c.regs.lookup(b); r != nil {
		return PathRegistered, r
	}
	if c.dev.isPinned(b) {
		return PathPinned, nil
	}
	if c.opt.DirectBelow > 0 && len(b) < c.opt.DirectBelow {
		return PathDirect, nil
	}
	return PathStaged, nil
}

// execute runs one transfer on the calling goroutine and counts it.
func (c *Copier) execute(ctx context.Context, o op, pinned bool) error {
	n := len(o.host)
	if n == 0 {
		return nil
	}
	if ctx == nil { // as pinpool.Pool.Get: no deadline, no cancellation
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		c.stats.canceled.Add(1)
		return fmt.Errorf("transfer: %s of %d bytes not started: %w", o.dir, n, err)
	}
	path, reg := c.choose(o.host, pinned)
	t0 := time.Now()
	var err error
	switch path {
	case PathDirect:
		if o.dir == HostToDevice {
			err = c.dev.copyHtoD(o.dev, o.host)
		} else {
			err = c.dev.copyDtoH(o.host, o.dev)
		}
		if err != nil {
			err = copyErr(o.dir, path, 0, n, err)
		}
	case PathPinned:
		err = c.direct(ctx, o, path, []piece{{0, n}})
	case PathRegistered:
		err = c.direct(ctx, o, path, reg.pieces(o.host))
		reg.done()
	case PathStaged:
		err = c.staged(ctx, o)
	}
	dt := time.Since(t0)
	switch {
	case err == nil:
		c.stats.record(o.dir, path, n, dt)
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		c.stats.canceled.Add(1)
	default:
		c.stats.failed.Add(1)
	}
	return err
}

// piece is a byte range [off, end) of a transfer's host memory.
type piece struct{ off, end int }

// direct copies page-locked memory with one asynchronous copy per piece,
// spread over the direction's streams, then waits for all of them. ctx is
// checked between pieces. A single piece goes on a private stream when one
// is free (quickCopy): the lowest latency for small copies.
func (c *Copier) direct(ctx context.Context, o op, path Path, pieces []piece) error {
	if len(pieces) == 1 {
		if s, ok := c.quick.get(); ok {
			return c.quickCopy(s, o, path, pieces[0])
		}
	}
	var small [4]event
	evs := small[:0]
	var err error
	for _, p := range pieces {
		if e := ctx.Err(); e != nil {
			err = cancelErr(o, p.off, e)
			break
		}
		ev, e := c.issue(c.stream(o.dir), o, path, p.off, o.host[p.off:p.end])
		if e != nil {
			err = e
			break
		}
		evs = append(evs, ev)
	}
	for _, ev := range evs {
		if e := ev.synchronize(); e != nil {
			c.events.drop(ev)
			err = errors.Join(err, copyErr(o.dir, path, 0, len(o.host), e))
			continue
		}
		c.events.put(ev)
	}
	return err
}

// issue queues the asynchronous copy of host (page-locked) at offset off of
// the transfer on s, and records an event after it. When recording fails,
// the copy may be queued without a fence: issue then waits for the stream
// before returning, so that the caller may reuse host.
func (c *Copier) issue(s stream, o op, path Path, off int, host []byte) (event, error) {
	ev, err := c.events.get()
	if err != nil {
		return nil, fmt.Errorf("transfer: creating an event: %w: %w", ErrCopy, err)
	}
	if o.dir == HostToDevice {
		err = s.copyHtoDAsync(o.dev+cuda.DevicePtr(off), host)
	} else {
		err = s.copyDtoHAsync(host, o.dev+cuda.DevicePtr(off))
	}
	if err != nil {
		c.events.put(ev)
		return nil, copyErr(o.dir, path, off, len(host), err)
	}
	if err := s.record(ev); err != nil {
		c.events.drop(ev)
		return nil, errors.Join(copyErr(o.dir, path, off, len(host), err), s.synchronize())
	}
	return ev, nil
}

func copyErr(d Direction, p Path, off, n int, err error) error {
	return fmt.Errorf("transfer: %s %s copy of %d bytes at offset %d: %w: %w", d, p, n, off, ErrCopy, err)
}

func cancelErr(o op, done int, err error) error {
	return fmt.Errorf("transfer: %s cancelled after issuing %d of %d bytes: %w", o.dir, done, len(o.host), err)
}
