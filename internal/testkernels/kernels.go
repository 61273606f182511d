package testkernels

import (
	"encoding/binary"
	"fmt"

	"github.com/pinpool/pinpool/cuda"
)

// Kernels are the PTX kernels of this package loaded into a context: a
// pattern fill, a checksum and a read-bandwidth sum, each matching a CPU
// reference (FillPattern, Checksum, ReadSum).
type Kernels struct {
	ctx                     *cuda.Context
	mod                     *cuda.Module
	fill, checksum, readSum *cuda.Function
	out                     *cuda.DeviceMem // 8-byte result cell
	maxBlocks               uint32
}

// kernelBlock is the block size of every launch.
const kernelBlock = 256

// Load loads the embedded PTX module into the context c.
func Load(c *cuda.Context) (*Kernels, error) {
	mp, err := c.Device().Attribute(cuda.AttrMultiprocessorCount)
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
		dst  **cuda.Function
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
func (k *Kernels) grid(n, per int) cuda.Dim3 {
	b := (n + kernelBlock*per - 1) / (kernelBlock * per)
	b = max(1, min(b, int(k.maxBlocks)))
	return cuda.Dim3{X: uint32(b), Y: 1, Z: 1}
}

// Fill queues, on stream s, the pattern FillPattern(dst, seed) over n bytes
// of device memory at dst.
func (k *Kernels) Fill(s *cuda.Stream, dst cuda.DevicePtr, n int, seed uint32) error {
	if n < 0 {
		return fmt.Errorf("%w: Fill of %d bytes", cuda.ErrSize, n)
	}
	if n == 0 {
		return nil
	}
	return k.fill.Launch(s, k.grid(n, 4), cuda.Dim3{X: kernelBlock, Y: 1, Z: 1}, 0, uint64(dst), uint64(n), uint64(seed))
}

// Checksum computes on the device Checksum of the n bytes at src, which may
// be device memory or a mapped host pointer, and waits for the result.
// Calls on one Kernels are serialised by the stream they use; use one
// Kernels per goroutine or the same stream.
func (k *Kernels) Checksum(s *cuda.Stream, src cuda.DevicePtr, n int) (uint64, error) {
	return k.reduce(s, k.checksum, src, n, 1)
}

// ReadSum computes on the device ReadSum of the n bytes at src (16-byte
// aligned), reading with 16-byte loads, and waits for the result.
func (k *Kernels) ReadSum(s *cuda.Stream, src cuda.DevicePtr, n int) (uint64, error) {
	if src%16 != 0 {
		return 0, fmt.Errorf("%w: ReadSum needs a 16-byte aligned address, got %#x", cuda.ErrInvalidValue, uintptr(src))
	}
	return k.reduce(s, k.readSum, src, n, 16)
}

// ReadSumAsync queues ReadSum into the result cell without waiting, for
// bandwidth measurements timed with events; Result reads the cell.
func (k *Kernels) ReadSumAsync(s *cuda.Stream, src cuda.DevicePtr, n int) error {
	if src%16 != 0 {
		return fmt.Errorf("%w: ReadSum needs a 16-byte aligned address, got %#x", cuda.ErrInvalidValue, uintptr(src))
	}
	return k.readSum.Launch(s, k.grid(n, 16), cuda.Dim3{X: kernelBlock, Y: 1, Z: 1}, 0, uint64(src), uint64(n), uint64(k.out.Ptr()))
}

func (k *Kernels) reduce(s *cuda.Stream, f *cuda.Function, src cuda.DevicePtr, n, per int) (uint64, error) {
	if n < 0 {
		return 0, fmt.Errorf("%w: reduction over %d bytes", cuda.ErrSize, n)
	}
	if s == nil {
		s = k.ctx.DefaultStream()
	}
	if err := s.MemsetD8Async(k.out.Ptr(), 0, 8); err != nil {
		return 0, err
	}
	if n > 0 {
		if err := f.Launch(s, k.grid(n, per), cuda.Dim3{X: kernelBlock, Y: 1, Z: 1}, 0, uint64(src), uint64(n), uint64(k.out.Ptr())); err != nil {
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
