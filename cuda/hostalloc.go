package cuda

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// HostAllocFlags are the flags of cuMemHostAlloc.
type HostAllocFlags uint32

// Flags of cuMemHostAlloc (values from cuda.h).
const (
	// HostAllocPortable makes the memory pinned for every context, not only
	// the allocating one.
	HostAllocPortable HostAllocFlags = 0x1
	// HostAllocDeviceMap maps the memory into the device's address space
	// (zero-copy); needs Properties.CanMapHostMemory.
	HostAllocDeviceMap HostAllocFlags = 0x2
	// HostAllocWriteCombined allocates write-combined memory: fast for the
	// CPU to write and the GPU to read, very slow for the CPU to read.
	HostAllocWriteCombined HostAllocFlags = 0x4
)

// HostRegisterFlags are the flags of cuMemHostRegister.
type HostRegisterFlags uint32

// Flags of cuMemHostRegister (values from cuda.h).
const (
	HostRegisterPortable  HostRegisterFlags = 0x1
	HostRegisterDeviceMap HostRegisterFlags = 0x2
	// HostRegisterIOMemory registers memory that is I/O memory, such as a
	// PCI BAR of a third-party device.
	HostRegisterIOMemory HostRegisterFlags = 0x4
	// HostRegisterReadOnly registers memory the device will only read; needs
	// Properties.ReadOnlyHostRegisterSupported.
	HostRegisterReadOnly HostRegisterFlags = 0x8
)

// HostMem is page-locked host memory made by HostAlloc or HostRegister. Free
// releases it exactly once.
type HostMem struct {
	ctx        *Context
	ptr        unsafe.Pointer
	size       int
	flags      uint32
	registered bool
	freed      atomic.Bool
}

// maxHostSize bounds one allocation or registration, far above any real one,
// so that sizes never overflow pointer arithmetic.
const maxHostSize = 1 << 46

// HostAlloc allocates size bytes of page-locked host memory with
// cuMemHostAlloc.
func (c *Context) HostAlloc(size int, flags HostAllocFlags) (*HostMem, error) {
	if size <= 0 || size > maxHostSize {
		return nil, fmt.Errorf("%w: HostAlloc of %d bytes", ErrSize, size)
	}
	var p unsafe.Pointer
	if r := c.call(fn.cuMemHostAlloc, uintptr(unsafe.Pointer(&p)), uintptr(size), uintptr(flags)); r != Success {
		return nil, check(fmt.Sprintf("cuMemHostAlloc(%d bytes, flags %#x)", size, uint32(flags)), r)
	}
	addPinned(uintptr(p), uintptr(size))
	return &HostMem{ctx: c, ptr: p, size: size, flags: uint32(flags)}, nil
}

// DefaultRegisterChunk is the most bytes the pinpool packages pin with one
// cuMemHostRegister call, 64 GiB: single registrations of 512 GiB and more
// have been seen to fail, so larger ranges are registered in parts of this
// size (cudahost.Options.RegisterChunk and transfer.Options.RegisterChunk
// default to it).
const DefaultRegisterChunk = 64 << 30

// HostRegister page-locks existing host memory b with cuMemHostRegister. b
// must stay alive and unmoved until the returned HostMem is freed, so it
// should be memory outside the Go heap (mmap) or a Go slice the caller keeps
// referenced. Registering memory that overlaps a registered range fails with
// ErrAlreadyRegistered.
func (c *Context) HostRegister(b []byte, flags HostRegisterFlags) (*HostMem, error) {
	if err := need(fn.cuMemHostRegister, "cuMemHostRegister_v2"); err != nil {
		return nil, err
	}
	if len(b) == 0 || len(b) > maxHostSize {
		return nil, fmt.Errorf("%w: HostRegister of %d bytes", ErrSize, len(b))
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if r := c.call(fn.cuMemHostRegister, uintptr(p), uintptr(len(b)), uintptr(flags)); r != Success {
		return nil, check(fmt.Sprintf("cuMemHostRegister(%d bytes, flags %#x)", len(b), uint32(flags)), r)
	}
	addPinned(uintptr(p), uintptr(len(b)))
	return &HostMem{ctx: c, ptr: p, size: len(b), flags: uint32(flags), registered: true}, nil
}

// Bytes is the memory as a slice of Len bytes.
func (m *HostMem) Bytes() []byte { return unsafe.Slice((*byte)(m.ptr), m.size) }

// Pointer is the memory's host address.
func (m *HostMem) Pointer() unsafe.Pointer { return m.ptr }

// Len is the memory's size in bytes.
func (m *HostMem) Len() int { return m.size }

// Registered reports whether the memory came from HostRegister.
func (m *HostMem) Registered() bool { return m.registered }

// Mapped reports whether the memory was made with the DeviceMap flag.
func (m *HostMem) Mapped() bool { return m.flags&uint32(HostAllocDeviceMap) != 0 }

// DevicePointer is the device address of mapped memory
// (cuMemHostGetDevicePointer); memory made without the DeviceMap flag gives
// ErrNotMapped.
func (m *HostMem) DevicePointer() (DevicePtr, error) {
	if m.freed.Load() {
		return 0, ErrClosed
	}
	if !m.Mapped() {
		return 0, ErrNotMapped
	}
	var d DevicePtr
	if r := m.ctx.call(fn.cuMemHostGetDevicePointer, uintptr(unsafe.Pointer(&d)), uintptr(m.ptr), 0); r != Success {
		return 0, check("cuMemHostGetDevicePointer", r)
	}
	return d, nil
}

// Flags returns the flags the driver records for memory from HostAlloc
// (cuMemHostGetFlags); for registered memory it returns the flags given to
// HostRegister.
func (m *HostMem) Flags() (uint32, error) {
	if m.freed.Load() {
		return 0, ErrClosed
	}
	if m.registered {
		return m.flags, nil
	}
	var f uint32
	if r := m.ctx.call(fn.cuMemHostGetFlags, uintptr(unsafe.Pointer(&f)), uintptr(m.ptr)); r != Success {
		return 0, check("cuMemHostGetFlags", r)
	}
	return f, nil
}

// Free releases the memory: cuMemFreeHost for allocated memory,
// cuMemHostUnregister for registered memory (which stays valid as ordinary
// memory). Both synchronise with the device, so keep them off hot paths. A
// second Free returns ErrClosed.
func (m *HostMem) Free() error {
	if m.freed.Swap(true) {
		return ErrClosed
	}
	removePinned(uintptr(m.ptr))
	if m.registered {
		return check("cuMemHostUnregister", m.ctx.call(fn.cuMemHostUnregister, uintptr(m.ptr)))
	}
	return check("cuMemFreeHost", m.ctx.call(fn.cuMemFreeHost, uintptr(m.ptr)))
}
