package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/pinpool/pinpool/cuda"
)

// ToDeviceFrom copies n bytes read from r to the device at dst, and
// returns how many bytes arrived there: all n when the error is nil. The
// calling goroutine reads r in order, each piece of at most ChunkSize
// bytes straight into a pinned staging buffer, while other goroutines copy
// the pieces read before to the device; the pinned memory held stays
// within the copier's window whatever n is, and none is held after it
// returns.
//
// A reader that ends before n bytes ends the transfer with an error
// wrapping io.ErrUnexpectedEOF (what it gave is copied); a reader's error,
// ctx ending (no further piece is read; those in flight complete) or Close
// end it with an error wrapping theirs. A nil ctx never ends. For a file,
// ToDeviceFromFile reads in parallel and is faster.
func (c *Copier) ToDeviceFrom(ctx context.Context, dst cuda.DevicePtr, r io.Reader, n int64) (int64, error) {
	ctx, ps, p, err := c.startStream(ctx, "ToDeviceFrom", "reader", r == nil, 0, n)
	if err != nil || ps == nil {
		return 0, err
	}
	defer c.end()
	type job struct {
		i    int
		s    staging
		data []byte
	}
	// What was read is copied even after the reader failed; a failed copy
	// or ctx ending stops the copies still queued.
	var copyFailed atomic.Bool
	jobs := make(chan job, c.opt.Slots())
	var wg sync.WaitGroup
	for range max(1, min(4, c.streamLanes(len(ps))-1)) {
		wg.Go(func() {
			for j := range jobs {
				var err error
				copied := false
				if !copyFailed.Load() {
					err = c.copyPiece(ctx, HostToDevice, dst+cuda.DevicePtr(ps[j.i].pos), j.data)
					copied = err == nil
				}
				j.s.done()
				if err != nil {
					copyFailed.Store(true)
					p.fail(err)
				} else if copied {
					p.complete(j.i)
				}
			}
		})
	}
	for i, pc := range ps {
		if p.stop.Load() {
			break
		}
		s, err := c.stage(ctx, HostToDevice)
		if err != nil {
			p.fail(err)
			break
		}
		k, err := caught("Read", func() (int, error) { return io.ReadFull(r, s.buf.Bytes()[:pc.n]) })
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("the reader ended after %d bytes: %w", pc.pos+int64(k), io.ErrUnexpectedEOF)
			} else {
				err = fmt.Errorf("reading after %d bytes: %w", pc.pos+int64(k), err)
			}
			if k > 0 { // what it gave goes to the device before the error is told
				p.mu.Lock()
				p.sizes[i] = k
				p.mu.Unlock()
				jobs <- job{i, s, s.buf.Bytes()[:k]}
			} else {
				s.done()
			}
			p.fail(err)
			break
		}
		jobs <- job{i, s, s.buf.Bytes()[:k]}
	}
	close(jobs)
	wg.Wait()
	return p.result("reader to device", n)
}

// FromDeviceTo copies n bytes from the device at src to w, in order, and
// returns how many bytes were written to w: all n when the error is nil.
// Other goroutines copy pieces of at most ChunkSize bytes from the device
// into pinned staging buffers ahead of the calling goroutine, which writes
// them to w; the pinned memory held stays within the copier's window, and
// none is held after it returns. A write error, ctx ending or Close end
// the transfer with an error wrapping theirs. A nil ctx never ends.
func (c *Copier) FromDeviceTo(ctx context.Context, w io.Writer, src cuda.DevicePtr, n int64) (int64, error) {
	ctx, ps, p, err := c.startStream(ctx, "FromDeviceTo", "writer", w == nil, 0, n)
	if err != nil || ps == nil {
		return 0, err
	}
	defer c.end()
	type job struct {
		s    staging
		copy chan error
	}
	queue := make(chan job, c.opt.Slots())
	var copies sync.WaitGroup
	go func() { // copies ahead of the writer, as far as the window lets it
		defer close(queue)
		for _, pc := range ps {
			if p.stop.Load() {
				return
			}
			s, err := c.stage(ctx, DeviceToHost)
			if err != nil {
				p.fail(err)
				return
			}
			j := job{s, make(chan error, 1)}
			copies.Go(func() {
				j.copy <- c.copyPiece(ctx, DeviceToHost, src+cuda.DevicePtr(pc.pos), s.buf.Bytes()[:pc.n])
			})
			queue <- j
		}
	}()
	i := 0
	for j := range queue {
		err := <-j.copy
		if err == nil && !p.stop.Load() {
			if _, err = caught("Write", func() (int, error) { return w.Write(j.s.buf.Bytes()[:ps[i].n]) }); err != nil {
				err = fmt.Errorf("writing after %d bytes: %w", ps[i].pos, err)
			}
		}
		j.s.done()
		if err != nil {
			p.fail(err)
		} else if !p.stop.Load() {
			p.complete(i)
		}
		i++
	}
	copies.Wait()
	return p.result("device to writer", n)
}
