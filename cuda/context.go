package cuda

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Context is a device's primary context, retained by NewContext and released
// by Close. All of its methods, and those of the streams, events, modules and
// memory made from it, are safe for concurrent use from any goroutine (see
// the package documentation for how).
//
// A Context must come from NewContext. The methods of a zero Context (or a
// nil *Context), and of the streams made from it, return an error instead of
// calling the driver: one wrapping ErrNoDriver without a driver, else one
// matching ErrInvalidContext.
type Context struct {
	dev    Device
	handle uintptr // CUcontext
	closed atomic.Bool
}

// NewContext retains the primary context of the device with the given
// ordinal. Each NewContext must be matched by a Close.
func NewContext(ordinal int) (*Context, error) {
	d, err := GetDevice(ordinal)
	if err != nil {
		return nil, err
	}
	var h uintptr
	if r := invoke(fn.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&h)), uintptr(d.handle)); r != Success {
		return nil, resultErr("cuDevicePrimaryCtxRetain", r)
	}
	return &Context{dev: d, handle: h}, nil
}

// Device is the context's device; the zero Device for a zero or nil
// Context.
func (c *Context) Device() Device {
	if c == nil {
		return Device{}
	}
	return c.dev
}

// Close releases the primary context. Memory, streams and events made from
// it must be freed first; the driver destroys the primary context when the
// last retain is released. A second Close returns ErrClosed.
func (c *Context) Close() error {
	if c.unusable() {
		return check("cuDevicePrimaryCtxRelease", resultZero)
	}
	if c.closed.Swap(true) {
		return ErrClosed
	}
	// Release on a locked thread with the context not current there any
	// more, so no thread keeps a dangling current context.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	invoke(fn.cuCtxSetCurrent, 0)
	if r := invoke(fn.cuDevicePrimaryCtxRelease, uintptr(c.dev.handle)); r != Success {
		return resultErr("cuDevicePrimaryCtxRelease", r)
	}
	return nil
}

// call runs one driver function with the context current on the calling
// goroutine's OS thread, which stays locked for the duration: the context is
// per thread and the goroutine could otherwise move between setting it and
// using it.
//
//go:uintptrescapes
func (c *Context) call(f uintptr, args ...uintptr) Result {
	if c.unusable() {
		return resultZero
	}
	if c.closed.Load() {
		return resultClosed
	}
	runtime.LockOSThread()
	if r := invoke(fn.cuCtxSetCurrent, c.handle); r != Success {
		runtime.UnlockOSThread()
		return r
	}
	r := invoke(f, args...)
	runtime.UnlockOSThread()
	return r
}

// fast is call for the hot functions whose arguments are handles, device
// addresses or pinned host addresses, never Go memory: one transition to C
// that makes the context current and calls f (see fastCall).
func (c *Context) fast(f, a0, a1, a2, a3 uintptr) Result {
	if c.unusable() {
		return resultZero
	}
	if c.closed.Load() {
		return resultClosed
	}
	return fastCall(c.handle, f, a0, a1, a2, a3, 0, 0)
}

// unusable reports whether c is nil or a zero Context, which has no driver
// context to make current.
func (c *Context) unusable() bool { return c == nil || c.handle == 0 }

// resultClosed is a code outside the driver's range that call returns for a
// closed context; check turns it into ErrClosed.
const resultClosed Result = -1

// resultZero is a code outside the driver's range that call returns for a
// zero or nil Context; check turns it into the no-driver error or
// ErrInvalidContext.
const resultZero Result = -2

// check turns a Result from call into an error naming op.
func check(op string, r Result) error {
	switch r {
	case resultClosed:
		return fmt.Errorf("%w: %s on a closed context", ErrClosed, op)
	case resultZero:
		return zeroContextErr(op)
	}
	return resultErr(op, r)
}

// zeroContextErr is the error of op on a Context that NewContext did not
// make: the driver's absence when there is no driver, else
// ErrInvalidContext.
func zeroContextErr(op string) error {
	if err := Load(); err != nil {
		return fmt.Errorf("%s on a zero Context: %w", op, err)
	}
	return fmt.Errorf("%w: %s on a zero Context (use NewContext)", ErrInvalidContext, op)
}

// Synchronize waits until all work in the context is done.
func (c *Context) Synchronize() error {
	return check("cuCtxSynchronize", c.call(fn.cuCtxSynchronize))
}

// Thread is an OS thread locked to one goroutine with the context current
// on it, for hot loops that issue many driver calls in a row: calls through
// a Thread skip the per-call cuCtxSetCurrent (the driver call, not only the
// Go side). A Thread must only be used by the goroutine that made it, until
// Unlock.
type Thread struct {
	c *Context
}

// LockThread locks the calling goroutine to its OS thread and makes the
// context current there. The goroutine must call Unlock when done and must
// not use the Thread from another goroutine.
func (c *Context) LockThread() (*Thread, error) {
	if c.unusable() {
		return nil, zeroContextErr("LockThread")
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	runtime.LockOSThread()
	if r := invoke(fn.cuCtxSetCurrent, c.handle); r != Success {
		runtime.UnlockOSThread()
		return nil, resultErr("cuCtxSetCurrent", r)
	}
	return &Thread{c: c}, nil
}

// Unlock undoes LockThread; afterwards the Thread's methods return
// ErrClosed.
func (t *Thread) Unlock() {
	t.c = nil
	runtime.UnlockOSThread()
}

// StreamQuery is Stream.Query without the per-call context switch.
func (t *Thread) StreamQuery(s *Stream) (bool, error) {
	if t.c == nil {
		return false, ErrClosed
	}
	return queryResult("cuStreamQuery", fastCall(0, fn.cuStreamQuery, s.handle, 0, 0, 0, 0, 0))
}

// EventQuery is Event.Done without the per-call context switch.
func (t *Thread) EventQuery(e *Event) (bool, error) {
	if t.c == nil {
		return false, ErrClosed
	}
	return queryResult("cuEventQuery", fastCall(0, fn.cuEventQuery, e.handle, 0, 0, 0, 0, 0))
}

// EventRecord is Event.Record without the per-call context switch.
func (t *Thread) EventRecord(e *Event, s *Stream) error {
	if t.c == nil {
		return ErrClosed
	}
	return resultErr("cuEventRecord", fastCall(0, fn.cuEventRecord, e.handle, s.handleOrZero(), 0, 0, 0, 0))
}

// CopyHtoDAsync is Stream.CopyHtoDAsync without the per-call context switch.
func (t *Thread) CopyHtoDAsync(s *Stream, dst DevicePtr, src []byte) error {
	if t.c == nil {
		return ErrClosed
	}
	if err := checkPinned(src); err != nil {
		return err
	}
	p, n := uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(len(src))
	if pinnedRun(p, n) == n {
		return resultErr("cuMemcpyHtoDAsync", fastCall(0, fn.cuMemcpyHtoDAsync, uintptr(dst), p, n, s.handleOrZero(), 0, 0))
	}
	return resultErr("cuMemcpyHtoDAsync", eachRun(p, n, func(off, p, n uintptr) Result {
		return fastCall(0, fn.cuMemcpyHtoDAsync, uintptr(dst)+off, p, n, s.handleOrZero(), 0, 0)
	}))
}

// CopyDtoHAsync is Stream.CopyDtoHAsync without the per-call context switch.
func (t *Thread) CopyDtoHAsync(s *Stream, dst []byte, src DevicePtr) error {
	if t.c == nil {
		return ErrClosed
	}
	if err := checkPinned(dst); err != nil {
		return err
	}
	p, n := uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(len(dst))
	if pinnedRun(p, n) == n {
		return resultErr("cuMemcpyDtoHAsync", fastCall(0, fn.cuMemcpyDtoHAsync, p, uintptr(src), n, s.handleOrZero(), 0, 0))
	}
	return resultErr("cuMemcpyDtoHAsync", eachRun(p, n, func(off, p, n uintptr) Result {
		return fastCall(0, fn.cuMemcpyDtoHAsync, p, uintptr(src)+off, n, s.handleOrZero(), 0, 0)
	}))
}

// CurrentContext returns the CUcontext handle current on the calling OS
// thread, 0 for none. It exists for tests and diagnostics; the result is only
// meaningful while the goroutine is locked to its thread.
func CurrentContext() (uintptr, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	var h uintptr
	if r := invoke(fn.cuCtxGetCurrent, uintptr(unsafe.Pointer(&h))); r != Success {
		return 0, resultErr("cuCtxGetCurrent", r)
	}
	return h, nil
}

// Handle is the raw CUcontext, for passing to other CUDA libraries; 0 for a
// zero or nil Context.
func (c *Context) Handle() uintptr {
	if c == nil {
		return 0
	}
	return c.handle
}
