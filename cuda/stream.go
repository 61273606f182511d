package cuda

import (
	"errors"
	"sync/atomic"
	"unsafe"
)

// StreamFlags are the flags of cuStreamCreate.
type StreamFlags uint32

const (
	// StreamDefault is a blocking stream: it synchronises with the legacy
	// default stream.
	StreamDefault StreamFlags = 0
	// StreamNonBlocking does not synchronise with the default stream, so
	// copies on it overlap with work elsewhere.
	StreamNonBlocking StreamFlags = 1
)

// Stream is a CUDA stream: work queued on it runs in order, and runs
// concurrently with other streams.
type Stream struct {
	ctx       *Context
	handle    uintptr
	foreign   bool // made by other code (WrapStream): Destroy leaves the handle alone
	destroyed atomic.Bool
}

// NewStream creates a stream (cuStreamCreate).
func (c *Context) NewStream(flags StreamFlags) (*Stream, error) {
	s := &Stream{ctx: c}
	if r := c.call(fn.cuStreamCreate, uintptr(unsafe.Pointer(&s.handle)), uintptr(flags)); r != Success {
		return nil, check("cuStreamCreate", r)
	}
	return s, nil
}

// DefaultStream is the context's legacy default stream (handle 0). It is
// never destroyed.
func (c *Context) DefaultStream() *Stream { return &Stream{ctx: c} }

func (s *Stream) handleOrZero() uintptr {
	if s == nil {
		return 0
	}
	return s.handle
}

// Handle is the raw CUstream.
func (s *Stream) Handle() uintptr { return s.handle }

// Synchronize waits until all work queued on the stream is done.
func (s *Stream) Synchronize() error {
	if s.destroyed.Load() {
		return ErrClosed
	}
	return check("cuStreamSynchronize", s.ctx.fast(fn.cuStreamSynchronize, s.handle, 0, 0, 0))
}

// Query reports whether all work queued on the stream is done, without
// blocking.
func (s *Stream) Query() (bool, error) {
	if s.destroyed.Load() {
		return false, ErrClosed
	}
	r := s.ctx.fast(fn.cuStreamQuery, s.handle, 0, 0, 0)
	if r == resultClosed || r == resultZero {
		return false, check("cuStreamQuery", r)
	}
	return queryResult("cuStreamQuery", r)
}

// WaitEvent makes future work on the stream wait until e has completed.
func (s *Stream) WaitEvent(e *Event) error {
	if err := need(fn.cuStreamWaitEvent, "cuStreamWaitEvent"); err != nil {
		return err
	}
	return check("cuStreamWaitEvent", s.ctx.fast(fn.cuStreamWaitEvent, s.handle, e.handle, 0, 0))
}

// Destroy destroys the stream; work already queued still completes. A second
// Destroy returns ErrClosed; the default stream cannot be destroyed. For a
// stream of other code (WrapStream) Destroy only retires the wrapper: the
// handle stays alive, its owner destroys it.
func (s *Stream) Destroy() error {
	if s.handle == 0 {
		return errors.New("cuda: the default stream cannot be destroyed")
	}
	if s.destroyed.Swap(true) {
		return ErrClosed
	}
	if s.foreign {
		return nil
	}
	return check("cuStreamDestroy", s.ctx.call(fn.cuStreamDestroy, s.handle))
}

// queryResult maps the result of a query call: Success is done, NOT_READY is
// not done, anything else is an error.
func queryResult(op string, r Result) (bool, error) {
	switch r {
	case Success:
		return true, nil
	case ErrNotReady.Code:
		return false, nil
	}
	return false, resultErr(op, r)
}
