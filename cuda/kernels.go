package cuda

import (
	"encoding/binary"
	"fmt"
)

// Kernels are the PTX kernels embedded in this package (kernels.ptx, PTX 7.0
// for sm_50, so that drivers from CUDA 11.4 on load them): a pattern fill, a
// checksum and a read-bandwidth sum, each matching a CPU reference in this
// package (FillPattern, Checksum, ReadSum). Tests use them to verify data on
// the device; benchmarks use ReadSum to measure zero-copy reads.
type Kernels struct {
	ctx                     *Context
	mod                     *Module
	fill, checksum, readSum *Function
	out                     *DeviceMem // 8-byte result cell
	maxBlocks               uint32
}

// kernelBlock is the block size of every launch.
const kernelBlock = 256

// LoadKernels loads the embedded PTX module into the context.
func (c *Context) LoadKernels() (*Kernels, error) {
	mp, err := c.Device().Attribute(AttrMultiprocessorCount)
	if err != nil {
		return nil, err
	}
	mod, err := c.LoadModule(kernelsPTX)
	if err != nil {
		return nil, fmt.Errorf("loading the embedded PTX: %w", err)
	}
	k := &Kernels{ctx: c, mod: mod, maxBlocks: uint32(max(mp, 1) * 8)}
	for _, x := range []struct {
		name string
		dst  **Function
	}{{KernelFill, &k.fill}, {KernelChecksum, &k.checksum}, {KernelReadSum, &k.readSum}} {
		if *x.dst, err = mod.Function(x.name); err != nil {
			mod.Unload()
			return nil, err
		}
	}
	if k.out, err = c.MemAlloc(8); err != nil {
		mod.Unload()
		return nil, err
	}
	return k, nil
}

// Close frees the result cell and unloads the module.
func (k *Kernels) Close() error {
	err := k.out.Free()
	if e := k.mod.Unload(); err == nil {
		err = e
	}
	return err
}

// grid returns enough blocks to cover n items at per items per thread, at
// most maxBlocks (the kernels loop over the rest).
func (k *Kernels) grid(n, per int) Dim3 {
	b := (n + kernelBlock*per - 1) / (kernelBlock * per)
	b = max(1, min(b, int(k.maxBlocks)))
	return Dim3{uint32(b), 1, 1}
}

// Fill queues, on stream s, the pattern FillPattern(dst, seed) over n bytes
// of device memory at dst.
func (k *Kernels) Fill(s *Stream, dst DevicePtr, n int, seed uint32) error {
	if n < 0 {
		return fmt.Errorf("%w: Fill of %d bytes", ErrSize, n)
	}
	if n == 0 {
		return nil
	}
	return k.fill.Launch(s, k.grid(n, 4), Dim3{kernelBlock, 1, 1}, 0, uint64(dst), uint64(n), uint64(seed))
}

// Checksum computes on the device Checksum of the n bytes at src, which may
// be device memory or a mapped host pointer, and waits for the result.
// Calls on one Kernels are serialised by the stream they use; use one
// Kernels per goroutine or the same stream.
func (k *Kernels) Checksum(s *Stream, src DevicePtr, n int) (uint64, error) {
	return k.reduce(s, k.checksum, src, n, 1)
}

// ReadSum computes on the device ReadSum of the n bytes at src (16-byte
// aligned), reading with 16-byte loads, and waits for the result.
func (k *Kernels) ReadSum(s *Stream, src DevicePtr, n int) (uint64, error) {
	if src%16 != 0 {
		return 0, fmt.Errorf("%w: ReadSum needs a 16-byte aligned address, got %#x", ErrInvalidValue, uintptr(src))
	}
	return k.reduce(s, k.readSum, src, n, 16)
}

// ReadSumAsync queues ReadSum into the result cell without waiting, for
// bandwidth measurements timed with events; Result reads the cell.
func (k *Kernels) ReadSumAsync(s *Stream, src DevicePtr, n int) error {
	if src%16 != 0 {
		return fmt.Errorf("%w: ReadSum needs a 16-byte aligned address, got %#x", ErrInvalidValue, uintptr(src))
	}
	return k.readSum.Launch(s, k.grid(n, 16), Dim3{kernelBlock, 1, 1}, 0, uint64(src), uint64(n), uint64(k.out.Ptr()))
}

func (k *Kernels) reduce(s *Stream, f *Function, src DevicePtr, n, per int) (uint64, error) {
	if n < 0 {
		return 0, fmt.Errorf("%w: reduction over %d bytes", ErrSize, n)
	}
	if s == nil {
		s = k.ctx.DefaultStream()
	}
	if err := s.MemsetD8Async(k.out.Ptr(), 0, 8); err != nil {
		return 0, err
	}
	if n > 0 {
		if err := f.Launch(s, k.grid(n, per), Dim3{kernelBlock, 1, 1}, 0, uint64(src), uint64(n), uint64(k.out.Ptr())); err != nil {
			return 0, err
		}
	}
	if err := s.Synchronize(); err != nil {
		return 0, err
	}
	var res [8]byte
	if err := k.ctx.CopyDtoH(res[:], k.out.Ptr()); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(res[:]), nil
}
