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
	err, syncErr := c.queueAndRecord(s, ev, false, func() error {
		return enqueueCopy(s, o.dir, o.dev+cuda.DevicePtr(off), host)
	})
	if err != nil {
		return nil, errors.Join(copyErr(o.dir, path, off, len(host), err), syncErr)
	}
	return ev, nil
}

// enqueueCopy queues one asynchronous copy in direction d between the
// pinned host memory host and the device address dev on s.
func enqueueCopy(s stream, d Direction, dev cuda.DevicePtr, host []byte) error {
	if d == HostToDevice {
		return s.copyHtoDAsync(dev, host)
	}
	return s.copyDtoHAsync(host, dev)
}

// queueAndRecord runs enqueue, which queues copies on s, and records ev
// after them. It returns enqueue's or record's error, and syncErr, the
// error of waiting for s where copies may run with no event after them:
// after a failed record, and after a failed enqueue that may have queued
// part of its copies (partial). After a failure ev is given back (enqueue
// failed) or destroyed (record failed).
func (c *Copier) queueAndRecord(s stream, ev event, partial bool, enqueue func() error) (err, syncErr error) {
	if err := enqueue(); err != nil {
		c.events.put(ev)
		if partial {
			syncErr = s.synchronize()
		}
		return err, syncErr
	}
	if err := s.record(ev); err != nil {
		c.events.drop(ev)
		return err, s.synchronize()
	}
	return nil, nil
}

// issueLock serialises the staged lanes' driver calls in one direction (a
// chunk's asynchronous copy and event record) without putting a lane to
// sleep. The driver serialises those calls anyway, and each grows slower
// when many threads make them at once; one caller at a time made
// device-to-host staging faster. Each direction has its own, as it has its
// own streams, window and lanes: transfers both ways at once
// (docs/results/2026-12-01-both-ways.md). A lane waiting here yields its
// processor to other goroutines but keeps its thread awake, since a
// sleeping thread would take longer to wake than the lock is held. In the
// package's lock order (see Copier) it comes before events.mu and
// runState.mu.
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
