package transfer

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/pinpool/pinpool/cuda"
)

// Step 4 of a transfer: issue. Every asynchronous copy of the package is
// queued with an event recorded after it that tells when its memory may be
// reused: by issue below, or for the chunks of a chunked transfer by the
// issue queue of batch.go, which may queue two of them as one batch.

// issue queues the asynchronous copy of host (page-locked, inside one
// allocation or registration) at offset off of the transfer on s, and
// records an event after it. When recording fails, the copy may be queued
// without a fence: issue then waits for the stream before returning, so
// that the caller may reuse host.
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

// issueLock serialises the staged lanes' driver calls (a chunk's
// asynchronous copy and event record) without putting a lane to sleep.
// The driver serialises those calls anyway, and each grows slower when
// many threads make them at once; one caller at a time made device-to-host
// staging faster. A lane waiting here yields its processor to other
// goroutines but keeps its thread awake, since a sleeping thread would
// take longer to wake than the lock is held. In the package's lock order
// (see Copier) it comes before events.mu and runState.mu.
type issueLock struct{ held atomic.Bool }

func (l *issueLock) lock() {
	spinUntil(func() bool { return l.held.CompareAndSwap(false, true) }, -1)
}

func (l *issueLock) unlock() { l.held.Store(false) }

func copyErr(d Direction, p Path, off, n int, err error) error {
	return fmt.Errorf("transfer: %s %s copy of %d bytes at offset %d: %w: %w", d, p, n, off, ErrCopy, err)
}

func cancelErr(o op, done int, err error) error {
	return fmt.Errorf("transfer: %s cancelled after issuing %d of %d bytes: %w", o.dir, done, len(o.host), err)
}
