package transfer

import (
	"cmp"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pinpool/pinpool/cuda"
)

// Step 4 of a transfer: issue. Every asynchronous copy of the package is queued by issue, with an
// event recorded after it that tells when its memory may be reused.

// issue queues the asynchronous copy of host (page-locked, inside one allocation or registration)
// at offset off of the transfer on s, and records an event after it. When recording fails, issue
// waits for the stream so that the caller may reuse host, unless that wait fails too (unsure: the
// device may still use host, which must never be reused).
func (c *Copier) issue(s stream, o op, path Path, off int, host []byte) (_ event, unsure bool, _ error) {
	ev, err := c.events.get()
	if err != nil {
		return nil, false, fmt.Errorf("transfer: creating an event: %w: %w", ErrCopy, err)
	}
	dev := o.dev + cuda.DevicePtr(off)
	if o.dir == HostToDevice {
		err = s.copyHtoDAsync(dev, host)
	} else {
		err = s.copyDtoHAsync(host, dev)
	}
	if err != nil {
		c.events.put(ev)
		return nil, false, copyErr(o.dir, path, off, len(host), err)
	}
	if err := s.record(ev); err != nil {
		c.events.drop(ev)
		syncErr := s.synchronize()
		return nil, syncErr != nil, errors.Join(copyErr(o.dir, path, off, len(host), err), syncErr)
	}
	return ev, false, nil
}

// issueLock serialises the staged lanes' driver calls in one direction (a chunk's copy and event)
// without putting a lane to sleep: the driver serialises them anyway, each grows slower when many
// threads make them at once, and a sleeping thread would take longer to wake than the lock is held.
// Each direction has its own (BenchmarkBothWays).
type issueLock struct{ held atomic.Bool }

func (l *issueLock) lock() { spinUntil(func() bool { return l.held.CompareAndSwap(false, true) }, -1) }

func (l *issueLock) unlock() { l.held.Store(false) }

func copyErr(d Direction, p Path, off, n int, err error) error {
	return fmt.Errorf("transfer: %s %s copy of %d bytes at offset %d: %w: %w", d, p, n, off, ErrCopy, err)
}

func cancelErr(o op, done int, err error) error {
	return fmt.Errorf("transfer: %s cancelled after issuing %d of %d bytes: %w", o.dir, done, len(o.host), err)
}

// events recycles the copier's events: creating one is a driver call, and a staged transfer records
// one per chunk.
type events struct {
	dev  device
	mu   sync.Mutex // a leaf of the lock order (see Copier)
	free []event
}

// get returns an idle event or makes one.
func (p *events) get() (event, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		e := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return e, nil
	}
	p.mu.Unlock()
	return p.dev.newEvent()
}

// put gives back an event that has completed (or was never recorded).
func (p *events) put(e event) {
	p.mu.Lock()
	p.free = append(p.free, e)
	p.mu.Unlock()
}

// drop destroys an event whose state is unknown (after a failure).
func (p *events) drop(e event) { e.destroy() }

// close destroys every idle event.
func (p *events) close() error {
	p.mu.Lock()
	free := p.free
	p.free = nil
	p.mu.Unlock()
	var first error
	for _, e := range free {
		first = cmp.Or(first, e.destroy())
	}
	return first
}

// failedFence reports an error, so that the pool retires the buffer: the device's use of it is
// unknown.
type failedFence struct{ err error }

func (f failedFence) Done() (bool, error) { return true, f.err }
