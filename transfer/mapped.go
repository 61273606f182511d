package transfer

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
)

// CanMapHostMemory reports whether the device of c can map host memory
// into its address space (the can-map-host-memory attribute), which
// zero-copy needs.
func CanMapHostMemory(c *cuda.Context) (bool, error) {
	v, err := c.Device().Attribute(cuda.AttrCanMapHostMemory)
	if err != nil {
		return false, fmt.Errorf("transfer: reading can-map-host-memory: %w", err)
	}
	return v != 0, nil
}

// MappedPointer returns the device address of a buffer from a pool whose
// memory is mapped (for example pinpool.CUDABackend over
// cudahost.New(cudahost.Options{Mapped: true})); kernels read and write the
// buffer in place through it. Otherwise the error wraps ErrNotMapped.
func MappedPointer(buf pinpool.Buffer) (cuda.DevicePtr, error) {
	p, err := buf.DevicePointer()
	if err != nil {
		if errors.Is(err, pinpool.ErrNotMapped) {
			return 0, fmt.Errorf("%w: %w", ErrNotMapped, err)
		}
		return 0, fmt.Errorf("transfer: device pointer of a pool buffer: %w", err)
	}
	return cuda.DevicePtr(p), nil
}

// ReadResult is a measurement of the GPU reading memory with the
// pinpool_read_sum kernel.
type ReadResult struct {
	Bytes  int           // bytes read per run
	Runs   int           // timed runs
	Median time.Duration // median kernel time of one run, from CUDA events
	Sum    uint64        // the kernel's result (cuda.ReadSum of the bytes)
}

// GBps is Bytes/Median in 10^9 bytes per second.
func (r ReadResult) GBps() float64 { return gbps(int64(r.Bytes), r.Median) }

// MeasureMappedRead times the pinpool_read_sum kernel (k.ReadSumAsync)
// reading n bytes at src, runs times after one untimed run, each between two
// timing events on a fresh stream, and returns the median and the kernel's
// sum (from a last, synchronous k.ReadSum). src is meant to be mapped host
// memory (MappedPointer), read by the GPU over the bus with no copy; device
// memory gives the comparison. src must be 16-byte aligned. It checks first
// that the device can map host memory (ErrNotMapped otherwise).
func MeasureMappedRead(c *cuda.Context, k *cuda.Kernels, src cuda.DevicePtr, n, runs int) (ReadResult, error) {
	if n <= 0 || runs <= 0 {
		return ReadResult{}, fmt.Errorf("%w: MeasureMappedRead of %d bytes, %d runs", ErrInvalidOptions, n, runs)
	}
	ok, err := CanMapHostMemory(c)
	if err != nil {
		return ReadResult{}, err
	}
	if !ok {
		return ReadResult{}, fmt.Errorf("%w: device %d cannot map host memory", ErrNotMapped, c.Device().Ordinal())
	}
	s, err := c.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		return ReadResult{}, fmt.Errorf("transfer: %w", err)
	}
	defer s.Destroy()
	var ev [2]*cuda.Event
	for i := range ev {
		if ev[i], err = c.NewEvent(cuda.EventDefault); err != nil {
			return ReadResult{}, fmt.Errorf("transfer: %w", err)
		}
		defer ev[i].Destroy()
	}
	if err := k.ReadSumAsync(s, src, n); err != nil { // warm-up
		return ReadResult{}, fmt.Errorf("transfer: read kernel: %w", err)
	}
	times := make([]time.Duration, 0, runs)
	for range runs {
		if err := ev[0].Record(s); err != nil {
			return ReadResult{}, fmt.Errorf("transfer: %w", err)
		}
		if err := k.ReadSumAsync(s, src, n); err != nil {
			return ReadResult{}, fmt.Errorf("transfer: read kernel: %w", err)
		}
		if err := ev[1].Record(s); err != nil {
			return ReadResult{}, fmt.Errorf("transfer: %w", err)
		}
		if err := ev[1].Synchronize(); err != nil {
			return ReadResult{}, fmt.Errorf("transfer: read kernel: %w", err)
		}
		d, err := cuda.ElapsedTime(ev[0], ev[1])
		if err != nil {
			return ReadResult{}, fmt.Errorf("transfer: %w", err)
		}
		times = append(times, d)
	}
	slices.Sort(times)
	sum, err := k.ReadSum(s, src, n)
	if err != nil {
		return ReadResult{}, fmt.Errorf("transfer: read kernel: %w", err)
	}
	return ReadResult{Bytes: n, Runs: runs, Median: times[len(times)/2], Sum: sum}, nil
}
