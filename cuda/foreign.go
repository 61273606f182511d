package cuda

import "fmt"

// WrapStream wraps a stream that other code created (a cgo library such as
// an inference runtime, or another binding), given its raw CUstream handle,
// so that this package's copies and events can be queued on it: a pinned
// copy on the stream that also runs the inference, for example. The
// wrapper does not own the stream: its Destroy retires the wrapper and
// never destroys the handle. Handle 0 is the context's legacy default
// stream, as DefaultStream.
//
// The stream must belong to this context: the device's primary context,
// which runtime-API code (cudaStreamCreate) and most bindings use; a
// stream of another context fails in the driver. Its owner keeps it alive
// while the wrapper is used, and destroys it only after the last call
// through the wrapper has returned (work already queued still completes).
// This package cannot check a raw handle: a destroyed or made-up one is
// undefined behaviour in the driver, as it is in C.
func (c *Context) WrapStream(handle uintptr) *Stream {
	return &Stream{ctx: c, handle: handle, foreign: handle != 0}
}

// WrapEvent wraps an event that other code created, given its raw CUevent
// handle. Like any Event it is a pinpool.Fence: a pool buffer released
// with ReleaseAfter(event) goes back to the pool once the work recorded
// before the event (by its owner, or by Record through the wrapper) has
// completed. The wrapper does not own the event: its Destroy retires the
// wrapper and never destroys the handle.
//
// The event must belong to this context (see WrapStream). Its owner keeps
// it alive while the wrapper is used, which includes the pool's polling: a
// buffer released after the event stays pending, and the pool keeps
// calling Done from its background goroutine (after Close too), until the
// pool has seen the event complete. Destroy the event only once no buffer
// released after it is pending any more: once the event has completed,
// after the pool's Close (which asks every pending fence once) or when
// Pool.Stats().BytesPending is 0.
// Handle 0 is no event: ErrInvalidValue.
func (c *Context) WrapEvent(handle uintptr) (*Event, error) {
	if handle == 0 {
		return nil, fmt.Errorf("cuda: WrapEvent of handle 0: %w", ErrInvalidValue)
	}
	return &Event{ctx: c, handle: handle, foreign: true}, nil
}
