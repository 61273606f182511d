package transfer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
)

// Reading order, callers above what they call: 1. dispatch (this file: the public copies, their
// segments and paths); 2. plan (plan.go: mode, chunks, lanes); 3. run (staged.go chunked, coop.go
// cooperative, lanes.go the standing lanes and the one busy wait); 4. issue (issue.go: every
// asynchronous copy and its event); 5. complete (complete.go: waiting, the CPU copies). Beneath
// them: the copier with its windows and Register (copier.go), options, registrations and their
// registry (register.go), the device, and at the bottom the shared types (types.go), errors and
// statistics. Streams and files (stream.go, file.go, pieces.go) run on the same lanes.
//
// One word per idea: a transfer is one call; a segment is a range of its host memory held by one
// kind of memory; a chunk is the bytes of one staged asynchronous copy; a staging buffer (one
// window slot) holds one chunk or several small ones; a stripe is the part of a chunk one lane
// copies at a time; a lane is a goroutine working on a staged transfer.

// ToDevice copies src to the device at dst and returns when the bytes are there. Each part of src
// goes the way its memory allows (see Path): memory registered with Register or already pinned as
// asynchronous copies, split at the boundaries of the registrations it covers; pageable memory
// through the driver's synchronous copy when the part is smaller than Options.DirectBelow, else
// staged. When ctx ends during a staged copy, no further chunk is issued, the chunks in flight are
// waited for, and the error wraps ctx.Err(); part of dst may then have been written. A nil ctx
// never ends.
func (c *Copier) ToDevice(ctx context.Context, dst cuda.DevicePtr, src []byte) error {
	return c.transfer(ctx, op{HostToDevice, dst, src}, false)
}

// FromDevice copies len(dst) bytes from the device at src into dst and returns when they are there.
// Paths and cancellation are those of ToDevice; after an error or cancellation dst may be partly
// written.
func (c *Copier) FromDevice(ctx context.Context, dst []byte, src cuda.DevicePtr) error {
	return c.transfer(ctx, op{DeviceToHost, src, dst}, false)
}

// ToDeviceBuffer copies the bytes of a live pool buffer to the device at dst with one asynchronous
// copy (PathPinned), skipping the memory detection of ToDevice. The buffer stays the caller's.
func (c *Copier) ToDeviceBuffer(ctx context.Context, dst cuda.DevicePtr, buf pinpool.Buffer) error {
	return c.bufferTransfer(ctx, HostToDevice, dst, buf)
}

// FromDeviceBuffer copies buf.Len() bytes from the device at src into a live pool buffer with one
// asynchronous copy (PathPinned).
func (c *Copier) FromDeviceBuffer(ctx context.Context, buf pinpool.Buffer, src cuda.DevicePtr) error {
	return c.bufferTransfer(ctx, DeviceToHost, src, buf)
}

func (c *Copier) bufferTransfer(ctx context.Context, d Direction, dev cuda.DevicePtr, buf pinpool.Buffer) error {
	b := buf.Bytes()
	if !buf.Valid() {
		return fmt.Errorf("transfer: pool buffer: %w", pinpool.ErrReleased)
	}
	return c.transfer(ctx, op{d, dev, b}, true)
}

// transfer executes one transfer between begin and end, so that Close waits for it. pinned says the
// host memory is one pool buffer.
func (c *Copier) transfer(ctx context.Context, o op, pinned bool) error {
	if err := c.begin(); err != nil {
		return err
	}
	defer c.end()
	return c.execute(ctx, o, pinned)
}

// PathOf reports the path a copy of b (either way) would take now: for memory of several kinds, the
// path of the most bytes, under which Stats counts the copy.
func (c *Copier) PathOf(b []byte) Path {
	if len(b) == 0 {
		return c.pageablePath(b)
	}
	var small [4]segment
	var uses [2]*Registration
	segs, regs := c.segments(small[:0], b, false, uses[:0])
	defer regs.done()
	return mainPath(segs)
}

// segments appends b's segments to segs and the registrations they use, each with a use taken (the
// caller calls done), to regs: a registered segment per registered part, the rest pinned (a pool
// buffer, or memory the driver reports page-locked) or pageable.
func (c *Copier) segments(segs []segment, b []byte, pinned bool, regs useList) ([]segment, useList) {
	if pinned {
		return append(segs, segment{0, len(b), PathPinned}), regs
	}
	regs = c.regs.covering(regs, b)
	pos := 0
	for _, r := range regs {
		first := len(segs)
		segs = r.appendParts(segs, b)
		for k := first; k < len(segs); k++ {
			s := segs[k]
			if s.off > pos { // a gap before the part: insert it
				segs = slices.Insert(segs, k, segment{pos, s.off, c.unregisteredPath(b[pos:s.off])})
				k++
			}
			pos = s.end
		}
	}
	if pos < len(b) {
		segs = append(segs, segment{pos, len(b), c.unregisteredPath(b[pos:])})
	}
	return segs, regs
}

// unregisteredPath is the path of memory b that no registration covers, asking the driver.
func (c *Copier) unregisteredPath(b []byte) Path {
	if c.pageable.pinned(b, c.tune.pageableFor, c.dev.isPinned) {
		return PathPinned
	}
	return c.pageablePath(b)
}

// pageableSeen is the last ranges the driver called pageable, each good for tuning.pageableFor: a
// question cost a paced frame tens of microseconds (BenchmarkPacedFrames, copier=ask-always). Memory
// other code pins meanwhile is staged until its entry expires: slower, never wrong.
type pageableSeen struct {
	mu     sync.Mutex
	ranges [8]seenRange
	next   int
}

type seenRange struct{ start, end, at int64 } // at: time.Since(epoch)

// pinned is ask's answer for b, or false if b lies in a range noted less than good ago.
func (s *pageableSeen) pinned(b []byte, good time.Duration, ask func([]byte) bool) bool {
	r := seenRange{int64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), 0, int64(time.Since(epoch))}
	r.end = r.start + int64(len(b))
	s.mu.Lock()
	seen := slices.ContainsFunc(s.ranges[:], func(e seenRange) bool {
		return e.start <= r.start && r.end <= e.end && r.at-e.at < int64(good)
	})
	s.mu.Unlock()
	if seen || ask(b) { // asked without the lock: other goroutines' questions need not wait
		return !seen
	}
	s.mu.Lock()
	s.ranges[s.next], s.next = r, (s.next+1)%len(s.ranges)
	s.mu.Unlock()
	return false
}

// pageablePath is the path of memory b that is not page-locked as a whole: the driver's copy below
// DirectBelow, else staged. Memory that begins page-locked and runs past its end is staged whatever
// its size: the driver takes it for pinned memory and refuses it.
func (c *Copier) pageablePath(b []byte) Path {
	if c.opt.DirectBelow > 0 && len(b) < c.opt.DirectBelow && (len(b) == 0 || !c.dev.isPinned(b[:1])) {
		return PathDirect
	}
	return PathStaged
}

// mainPath is the path of the most bytes of segs.
func mainPath(segs []segment) Path {
	var bytes [numPaths]int
	best := segs[0].path
	for _, s := range segs {
		bytes[s.path] += s.end - s.off
		if bytes[s.path] > bytes[best] {
			best = s.path
		}
	}
	return best
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
	t0 := time.Now()
	var small [4]segment
	var uses [2]*Registration
	segs, regs := c.segments(small[:0], o.host, pinned, uses[:0])
	var err error
	for i, s := range segs { // memory of several kinds: one segment after the other
		if e := ctx.Err(); e != nil && i > 0 {
			err = cancelErr(o, s.off, e)
			break
		}
		if err = c.segment(ctx, op{o.dir, o.dev + cuda.DevicePtr(s.off), o.host[s.off:s.end]}, s.path); err != nil {
			if len(segs) > 1 {
				err = fmt.Errorf("transfer: %s of %d bytes, the %d at offset %d: %w", o.dir, n, s.end-s.off, s.off, err)
			}
			break
		}
	}
	regs.done()
	c.stats.count(ctx, err, o.dir, mainPath(segs), n, time.Since(t0))
	return err
}

// segment copies o, whose host memory is one segment, by path.
func (c *Copier) segment(ctx context.Context, o op, path Path) error {
	switch path {
	case PathDirect:
		var err error
		if o.dir == HostToDevice {
			err = c.dev.copyHtoD(o.dev, o.host)
		} else {
			err = c.dev.copyDtoH(o.host, o.dev)
		}
		if err != nil {
			return copyErr(o.dir, path, 0, len(o.host), err)
		}
		return nil
	case PathStaged:
		return c.staged(ctx, o)
	}
	ev, _, err := c.issue(c.stream(o.dir), o, path, 0, o.host)
	if err != nil {
		return err
	}
	return c.wait(ev, o.dir, path, 0, len(o.host))
}

// Transfer is an asynchronous copy started by ToDeviceAsync or FromDeviceAsync. It is a
// pinpool.Fence: a pool buffer whose bytes the transfer reads or writes can be released with
// ReleaseAfter(transfer).
type Transfer struct {
	dir  Direction
	n    int
	done chan struct{}
	err  error
}

// Wait blocks until the transfer has finished and returns its error: nil when every byte is in
// place, an error wrapping ctx.Err() when it was cancelled (no chunk is in flight then), or a copy
// error.
func (t *Transfer) Wait() error {
	<-t.done
	return t.err
}

// Done reports, without blocking, whether the transfer has finished, with its error once it has (so
// that a pool retires a buffer released after a failed transfer instead of trusting it).
func (t *Transfer) Done() (bool, error) {
	select {
	case <-t.done:
		return true, t.err
	default:
		return false, nil
	}
}

// Direction is the transfer's direction.
func (t *Transfer) Direction() Direction { return t.dir }

// Len is the number of bytes the transfer moves.
func (t *Transfer) Len() int { return t.n }

// ToDeviceAsync starts ToDevice on another goroutine and returns at once. src must not be changed
// until the transfer has finished: staged chunks are copied from it while the transfer runs.
// Cancelling ctx stops issuing chunks; Wait then returns an error wrapping ctx.Err() once the
// chunks in flight have completed. Close waits for the transfer.
func (c *Copier) ToDeviceAsync(ctx context.Context, dst cuda.DevicePtr, src []byte) *Transfer {
	return c.startAsync(ctx, op{HostToDevice, dst, src})
}

// FromDeviceAsync starts FromDevice on another goroutine and returns at once. dst holds the bytes
// once Wait has returned nil; it must not be read or written before.
func (c *Copier) FromDeviceAsync(ctx context.Context, dst []byte, src cuda.DevicePtr) *Transfer {
	return c.startAsync(ctx, op{DeviceToHost, src, dst})
}

func (c *Copier) startAsync(ctx context.Context, o op) *Transfer {
	t := &Transfer{dir: o.dir, n: len(o.host), done: make(chan struct{})}
	if t.err = c.begin(); t.err != nil {
		close(t.done)
		return t
	}
	go func() {
		defer c.end()
		t.err = c.execute(ctx, o, false)
		close(t.done)
	}()
	return t
}
