package cuda

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"unsafe"
)

// Module is a loaded PTX or cubin module.
type Module struct {
	ctx      *Context
	handle   uintptr
	unloaded atomic.Bool
}

// JIT options of cuModuleLoadDataEx (values from cuda.h).
const (
	jitErrorLogBuffer          = 5
	jitErrorLogBufferSizeBytes = 6
)

// LoadModule loads a PTX module (text) or a cubin into the context. A PTX
// that the driver's JIT compiler rejects gives an error carrying the
// compiler's log.
func (c *Context) LoadModule(image string) (*Module, error) {
	if image == "" {
		return nil, fmt.Errorf("%w: empty module image", ErrInvalidValue)
	}
	// cuModuleLoadData wants a NUL-terminated image.
	img := append([]byte(image), 0)
	logBuf := make([]byte, 8192)
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSizeBytes}
	vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
	m := &Module{ctx: c}
	r := c.call(fn.cuModuleLoadDataEx,
		uintptr(unsafe.Pointer(&m.handle)),
		uintptr(unsafe.Pointer(&img[0])),
		uintptr(len(opts)),
		uintptr(unsafe.Pointer(&opts[0])),
		uintptr(unsafe.Pointer(&vals[0])))
	runtime.KeepAlive(logBuf)
	runtime.KeepAlive(img)
	if r != Success {
		err := check("cuModuleLoadDataEx", r)
		if i := bytes.IndexByte(logBuf, 0); i > 0 {
			err = fmt.Errorf("%w; JIT log: %s", err, strings.TrimSpace(string(logBuf[:i])))
		}
		return nil, err
	}
	return m, nil
}

// Unload unloads the module; its functions must not be launched afterwards.
// A second Unload returns ErrClosed.
func (m *Module) Unload() error {
	if m.unloaded.Swap(true) {
		return ErrClosed
	}
	return check("cuModuleUnload", m.ctx.call(fn.cuModuleUnload, m.handle))
}

// Function is a kernel entry point of a loaded module.
type Function struct {
	mod    *Module
	name   string
	handle uintptr
}

// Function looks up the kernel with the given entry name.
func (m *Module) Function(name string) (*Function, error) {
	if m.unloaded.Load() {
		return nil, ErrClosed
	}
	cname := append([]byte(name), 0)
	f := &Function{mod: m, name: name}
	r := m.ctx.call(fn.cuModuleGetFunction, uintptr(unsafe.Pointer(&f.handle)), m.handle, uintptr(unsafe.Pointer(&cname[0])))
	runtime.KeepAlive(cname)
	if r != Success {
		return nil, check("cuModuleGetFunction("+name+")", r)
	}
	return f, nil
}

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z uint32 }

// Launch queues the kernel on stream s (nil for the default stream) with the
// given grid and block sizes and arguments. Each argument is passed as a
// 64-bit value: pointers (DevicePtr) and 64-bit integers as they are; a
// kernel parameter of 32 bits reads the low half, which is right on the
// little-endian machines CUDA runs on.
func (f *Function) Launch(s *Stream, grid, block Dim3, sharedMem uint32, args ...uint64) error {
	if f.mod.unloaded.Load() {
		return ErrClosed
	}
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 || block.X == 0 || block.Y == 0 || block.Z == 0 {
		return fmt.Errorf("%w: launch of %s with an empty grid or block", ErrInvalidValue, f.name)
	}
	vals := make([]uint64, len(args)+1) // +1 so &vals[0] exists for no args
	copy(vals, args)
	ptrs := make([]uintptr, len(args)+1)
	for i := range args {
		ptrs[i] = uintptr(unsafe.Pointer(&vals[i]))
	}
	r := f.mod.ctx.call(fn.cuLaunchKernel, f.handle,
		uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z),
		uintptr(block.X), uintptr(block.Y), uintptr(block.Z),
		uintptr(sharedMem), s.handleOrZero(),
		uintptr(unsafe.Pointer(&ptrs[0])), 0)
	runtime.KeepAlive(vals)
	runtime.KeepAlive(ptrs)
	return check("cuLaunchKernel("+f.name+")", r)
}
