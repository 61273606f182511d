package transfer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
)

// Streams and files. Data that is not in memory yet (a file, a socket, a
// decoder's output) moves in pieces of at most ChunkSize bytes, each
// through one pinned staging buffer held under one slot of the copier's
// window: read into the buffer, then one asynchronous copy to the device
// (or the other way round). Several pieces are in flight at once, so
// reading, staging and DMA overlap, and the pinned memory held stays
// within the window whatever the size of the data. No pageable copy
// happens on the way: the reader writes straight into pinned memory.

// piece is one part of a stream transfer: pos bytes from the start of the
// device range, n bytes long; for files, at file offset off.
type piece struct {
	pos, off int64
	n        int
}

// splitPieces cuts [off, off+n) of a file into pieces at multiples of
// chunk in file offsets, so that every piece but the first and the last is
// aligned for direct I/O, and each, with its start rounded down and its
// end rounded up to directAlign, fits one staging buffer of chunk bytes.
func splitPieces(off, n int64, chunk int) []piece {
	var ps []piece
	for pos := int64(0); pos < n; {
		at := off + pos
		end := min((at/int64(chunk)+1)*int64(chunk), off+n)
		ps = append(ps, piece{pos: pos, off: at, n: int(end - at)})
		pos += end - at
	}
	return ps
}

// streamLanes is how many goroutines work on one stream transfer: twice
// the copier's lanes (each spends part of its time waiting for its DMA),
// within the window's slots and the number of pieces.
func (c *Copier) streamLanes(pieces int) int {
	return max(1, min(2*c.opt.Lanes, c.opt.Slots(), pieces))
}

// staging is one piece's pinned buffer and its window slot.
type staging struct {
	w   *window
	buf pinpool.Buffer
}

// stage takes a slot of direction d's window and a staging buffer of
// ChunkSize bytes, or returns ctx's error, before taking anything when ctx
// has already ended.
func (c *Copier) stage(ctx context.Context, d Direction) (staging, error) {
	if err := ctx.Err(); err != nil {
		return staging{}, err
	}
	w := c.wins[d]
	if err := w.acquire(ctx); err != nil {
		return staging{}, err
	}
	buf, err := c.pool.Get(ctx, c.opt.ChunkSize)
	if err != nil {
		w.release()
		if ctx.Err() != nil {
			return staging{}, ctx.Err()
		}
		return staging{}, fmt.Errorf("%w: %w", ErrStaging, err)
	}
	return staging{w, buf}, nil
}

// done gives the buffer and the slot back.
func (s staging) done() {
	s.buf.Release()
	s.w.release()
}

// copyPiece copies pinned memory b (part of a staging buffer) to or from
// the device at dev, and returns once the copy is complete.
func (c *Copier) copyPiece(ctx context.Context, dir Direction, dev cuda.DevicePtr, b []byte) error {
	return c.transfer(ctx, op{dir, dev, b}, true)
}

// progress records which pieces of a transfer are complete, beside the
// first error and the flag that stops the lanes (runState; its lock, a
// leaf, guards done and sizes too).
type progress struct {
	runState
	done  []bool
	sizes []int
}

func newProgress(ps []piece) *progress {
	p := &progress{done: make([]bool, len(ps)), sizes: make([]int, len(ps))}
	for i, pc := range ps {
		p.sizes[i] = pc.n
	}
	return p
}

func (p *progress) complete(i int) {
	p.mu.Lock()
	p.done[i] = true
	p.mu.Unlock()
}

// arrived is the bytes of the complete pieces from the start, up to the
// first one that is not.
func (p *progress) arrived() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for i, d := range p.done {
		if !d {
			break
		}
		n += int64(p.sizes[i])
	}
	return n
}

// result is the transfer's outcome: the bytes that arrived, and the first
// error, said with the range it ended at.
func (p *progress) result(what string, total int64) (int64, error) {
	n := p.arrived()
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err == nil {
		return n, nil
	}
	return n, fmt.Errorf("transfer: %s: %d of %d bytes arrived: %w", what, n, total, err)
}

// stagedLanes runs work for every piece of ps, each with a staging buffer
// of ChunkSize bytes held under a window slot for the call, on the
// copier's stream lanes (the caller's goroutine among them), each taking
// the next piece, until all are done or one fails (progress.stop) or ctx
// ends.
func (c *Copier) stagedLanes(ctx context.Context, d Direction, ps []piece, p *progress, work func(pc piece, buf []byte) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	piece := func(i int) error {
		s, err := c.stage(ctx, d)
		if err != nil {
			return err
		}
		defer s.done()
		return work(ps[i], s.buf.Bytes())
	}
	lane := func() {
		for !p.stop.Load() {
			i := int(next.Add(1) - 1)
			if i >= len(ps) {
				return
			}
			if err := piece(i); err != nil {
				p.fail(err)
				return
			}
			p.complete(i)
		}
	}
	for range c.streamLanes(len(ps)) - 1 {
		wg.Go(lane)
	}
	lane()
	wg.Wait()
}

// caught runs fn, the caller's reader or writer, turning a panic into an
// error wrapping ErrCallbackPanic: it may run on a lane of the copier, where
// a panic would end the process.
func caught(what string, fn func() (int, error)) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("%w: %s: %v", ErrCallbackPanic, what, r)
		}
	}()
	return fn()
}

// startStream checks the arguments of a stream or file transfer of n
// bytes from offset off (isNil: its reader, writer or file, named arg, is
// nil) and begins it on the copier, so that Close waits for it. It returns
// the context to use (a nil ctx never ends), the pieces and their
// progress; no pieces and no error when there is nothing to move, and
// then nothing was begun. The caller defers c.end when there are pieces.
func (c *Copier) startStream(ctx context.Context, what, arg string, isNil bool, off, n int64) (context.Context, []piece, *progress, error) {
	switch {
	case n < 0 || off < 0:
		return nil, nil, nil, fmt.Errorf("%w: %s: offset %d, length %d", ErrInvalidRange, what, off, n)
	case isNil:
		return nil, nil, nil, fmt.Errorf("%w: %s: nil %s", ErrInvalidRange, what, arg)
	case n == 0:
		return nil, nil, nil, nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := c.begin(); err != nil {
		return nil, nil, nil, err
	}
	ps := splitPieces(off, n, c.opt.ChunkSize)
	return ctx, ps, newProgress(ps), nil
}
