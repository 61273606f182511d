package cuda

import (
	"fmt"
	"runtime"
	"unsafe"
)

// CopyHtoD copies src from host memory (any memory, pageable or pinned) to
// the device at dst, and returns when the data is on the device.
//
// cuMemcpyHtoD alone returns once a pageable source has been staged, before
// the DMA to the device has finished; work on a non-blocking stream could
// then read old data (seen on the H200). CopyHtoD therefore also waits for
// the legacy default stream that the copy runs on.
func (c *Context) CopyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	r := eachRun(uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(len(src)), func(off, p, n uintptr) Result {
		return c.call(fn.cuMemcpyHtoD, uintptr(dst)+off, p, n)
	})
	runtime.KeepAlive(src)
	if r != Success {
		return check("cuMemcpyHtoD", r)
	}
	return c.syncLegacy()
}

// CopyDtoH copies len(dst) bytes from the device at src into host memory dst
// (any memory), and returns when the copy is done.
func (c *Context) CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	r := eachRun(uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(len(dst)), func(off, p, n uintptr) Result {
		return c.call(fn.cuMemcpyDtoH, p, uintptr(src)+off, n)
	})
	runtime.KeepAlive(dst)
	return check("cuMemcpyDtoH", r)
}

// CopyDtoD copies n bytes between device addresses and returns when the
// copy is done.
func (c *Context) CopyDtoD(dst, src DevicePtr, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: CopyDtoD of %d bytes", ErrSize, n)
	}
	if n == 0 {
		return nil
	}
	if err := check("cuMemcpyDtoD", c.call(fn.cuMemcpyDtoD, uintptr(dst), uintptr(src), uintptr(n))); err != nil {
		return err
	}
	return c.syncLegacy()
}

// syncLegacy waits for the legacy default stream: the driver's "synchronous"
// device-to-device copies and memsets only queue work there.
func (c *Context) syncLegacy() error {
	return check("cuStreamSynchronize(legacy)", c.fast(fn.cuStreamSynchronize, 0, 0, 0, 0))
}

// CopyHtoDAsync queues a copy of src to the device at dst on the stream and
// returns at once. src must be page-locked (ErrNotPinned otherwise) and must
// not be changed or freed until the copy has completed: record an event
// after it and wait for the event, or release a pool buffer with
// ReleaseAfter(event).
func (s *Stream) CopyHtoDAsync(dst DevicePtr, src []byte) error {
	if err := checkPinned(src); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	p, n := uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(len(src))
	if pinnedRun(p, n) == n {
		return check("cuMemcpyHtoDAsync", s.ctx.fast(fn.cuMemcpyHtoDAsync, uintptr(dst), p, n, s.handle))
	}
	return check("cuMemcpyHtoDAsync", eachRun(p, n, func(off, p, n uintptr) Result {
		return s.ctx.fast(fn.cuMemcpyHtoDAsync, uintptr(dst)+off, p, n, s.handle)
	}))
}

// CopyDtoHAsync queues a copy of len(dst) bytes from the device at src into
// dst on the stream and returns at once. dst must be page-locked
// (ErrNotPinned otherwise); its contents are valid once the stream has
// passed the copy.
func (s *Stream) CopyDtoHAsync(dst []byte, src DevicePtr) error {
	if err := checkPinned(dst); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	p, n := uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(len(dst))
	if pinnedRun(p, n) == n {
		return check("cuMemcpyDtoHAsync", s.ctx.fast(fn.cuMemcpyDtoHAsync, p, uintptr(src), n, s.handle))
	}
	return check("cuMemcpyDtoHAsync", eachRun(p, n, func(off, p, n uintptr) Result {
		return s.ctx.fast(fn.cuMemcpyDtoHAsync, p, uintptr(src)+off, n, s.handle)
	}))
}

// CopyDtoDAsync queues a copy of n bytes between device addresses.
func (s *Stream) CopyDtoDAsync(dst, src DevicePtr, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: CopyDtoDAsync of %d bytes", ErrSize, n)
	}
	if n == 0 {
		return nil
	}
	return check("cuMemcpyDtoDAsync", s.ctx.fast(fn.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), s.handle))
}
