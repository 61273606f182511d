package cuda

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// DevicePtr is a device address (CUdeviceptr).
type DevicePtr uintptr

// DeviceMem is device memory from MemAlloc. Free releases it exactly once.
type DeviceMem struct {
	ctx   *Context
	ptr   DevicePtr
	size  int
	freed atomic.Bool
}

// MemAlloc allocates size bytes of device memory (cuMemAlloc).
func (c *Context) MemAlloc(size int) (*DeviceMem, error) {
	if size <= 0 || size > maxHostSize {
		return nil, fmt.Errorf("%w: MemAlloc of %d bytes", ErrSize, size)
	}
	var p DevicePtr
	if r := c.call(fn.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(size)); r != Success {
		return nil, check(fmt.Sprintf("cuMemAlloc(%d bytes)", size), r)
	}
	return &DeviceMem{ctx: c, ptr: p, size: size}, nil
}

// Ptr is the memory's device address.
func (m *DeviceMem) Ptr() DevicePtr { return m.ptr }

// Len is the memory's size in bytes.
func (m *DeviceMem) Len() int { return m.size }

// Free releases the memory (cuMemFree); a second Free returns ErrClosed.
func (m *DeviceMem) Free() error {
	if m.freed.Swap(true) {
		return ErrClosed
	}
	return check("cuMemFree", m.ctx.call(fn.cuMemFree, uintptr(m.ptr)))
}

// MemGetInfo returns the device's free and total memory in bytes.
func (c *Context) MemGetInfo() (free, total uint64, err error) {
	if r := c.call(fn.cuMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total))); r != Success {
		return 0, 0, check("cuMemGetInfo", r)
	}
	return free, total, nil
}

// MemAddressRange returns the base address and size of the device
// allocation that p lies in (cuMemGetAddressRange), so that a caller can
// refuse a copy that would run past it before it starts. A driver without
// the call gives an error wrapping ErrMissingSymbol; an address the driver
// does not know, its *Error.
func (c *Context) MemAddressRange(p DevicePtr) (base DevicePtr, size uint64, err error) {
	if fn.cuMemGetAddressRange == 0 {
		return 0, 0, fmt.Errorf("%w: cuMemGetAddressRange_v2", ErrMissingSymbol)
	}
	if r := c.call(fn.cuMemGetAddressRange, uintptr(unsafe.Pointer(&base)), uintptr(unsafe.Pointer(&size)), uintptr(p)); r != Success {
		return 0, 0, check("cuMemGetAddressRange", r)
	}
	return base, size, nil
}

// MemsetD8 sets n bytes at dst to v and returns when done (the driver's
// memset alone is asynchronous to the host for device memory).
func (c *Context) MemsetD8(dst DevicePtr, v byte, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: MemsetD8 of %d bytes", ErrSize, n)
	}
	if err := check("cuMemsetD8", c.call(fn.cuMemsetD8, uintptr(dst), uintptr(v), uintptr(n))); err != nil {
		return err
	}
	return c.syncLegacy()
}

// MemsetD32 sets n 32-bit words at dst (4-byte aligned) to v and returns
// when done.
func (c *Context) MemsetD32(dst DevicePtr, v uint32, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: MemsetD32 of %d words", ErrSize, n)
	}
	if err := check("cuMemsetD32", c.call(fn.cuMemsetD32, uintptr(dst), uintptr(v), uintptr(n))); err != nil {
		return err
	}
	return c.syncLegacy()
}

// MemsetD8Async queues, on the stream, setting n bytes at dst to v.
func (s *Stream) MemsetD8Async(dst DevicePtr, v byte, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: MemsetD8Async of %d bytes", ErrSize, n)
	}
	return check("cuMemsetD8Async", s.ctx.fast(fn.cuMemsetD8Async, uintptr(dst), uintptr(v), uintptr(n), s.handleOrZero()))
}
