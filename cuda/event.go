package cuda

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// EventFlags are the flags of cuEventCreate.
type EventFlags uint32

const (
	// EventDefault records timestamps, for ElapsedTime.
	EventDefault EventFlags = 0
	// EventBlockingSync makes Synchronize sleep instead of spinning.
	EventBlockingSync EventFlags = 1
	// EventDisableTiming records no timestamp; cheapest for fences.
	EventDisableTiming EventFlags = 2
)

// Event is a CUDA event: a marker in a stream that completes when the work
// queued before it is done. It satisfies the pinpool.Fence interface through
// Done, so a pinned buffer can be released after an asynchronous copy.
type Event struct {
	ctx       *Context
	handle    uintptr
	foreign   bool // made by other code (WrapEvent): Destroy leaves the handle alone
	destroyed atomic.Bool
}

// NewEvent creates an event (cuEventCreate).
func (c *Context) NewEvent(flags EventFlags) (*Event, error) {
	e := &Event{ctx: c}
	if r := c.call(fn.cuEventCreate, uintptr(unsafe.Pointer(&e.handle)), uintptr(flags)); r != Success {
		return nil, check("cuEventCreate", r)
	}
	return e, nil
}

// Record marks the current end of stream s (nil for the default stream);
// the event completes when the work queued on s before it is done.
func (e *Event) Record(s *Stream) error {
	if e.destroyed.Load() {
		return ErrClosed
	}
	return check("cuEventRecord", e.ctx.fast(fn.cuEventRecord, e.handle, s.handleOrZero(), 0, 0))
}

// Done reports, without blocking, whether the work recorded before the event
// has completed (cuEventQuery). An event never recorded is done.
func (e *Event) Done() (bool, error) {
	if e.destroyed.Load() {
		return false, ErrClosed
	}
	r := e.ctx.fast(fn.cuEventQuery, e.handle, 0, 0, 0)
	if r == resultClosed || r == resultZero {
		return false, check("cuEventQuery", r)
	}
	return queryResult("cuEventQuery", r)
}

// Synchronize waits until the event has completed.
func (e *Event) Synchronize() error {
	if e.destroyed.Load() {
		return ErrClosed
	}
	return check("cuEventSynchronize", e.ctx.fast(fn.cuEventSynchronize, e.handle, 0, 0, 0))
}

// ElapsedTime is the time between two completed events recorded with
// timing (about 0.5 µs resolution).
func ElapsedTime(start, end *Event) (time.Duration, error) {
	if start.destroyed.Load() || end.destroyed.Load() {
		return 0, ErrClosed
	}
	var ms float32
	if r := start.ctx.call(fn.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), start.handle, end.handle); r != Success {
		return 0, check("cuEventElapsedTime", r)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Destroy destroys the event; a second Destroy returns ErrClosed. For an
// event of other code (WrapEvent) Destroy only retires the wrapper: the
// handle stays alive, its owner destroys it.
func (e *Event) Destroy() error {
	if e.destroyed.Swap(true) {
		return ErrClosed
	}
	if e.foreign {
		return nil
	}
	return check("cuEventDestroy", e.ctx.call(fn.cuEventDestroy, e.handle))
}

// Handle is the raw CUevent.
func (e *Event) Handle() uintptr { return e.handle }
