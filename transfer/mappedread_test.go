package transfer

import (
	"fmt"
	"slices"
	"time"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/internal/testkernels"
)

// The GPU tests' measurement of mapped reads (they check that zero-copy
// memory reads back right and time it). It lived in the package's API;
// cmd/pinpool/internal/measure is the one home of measurements, so here it is a test
// helper only.

// canMapHostMemory reports whether the device of c can map host memory
// into its address space (the can-map-host-memory attribute), which
// zero-copy needs.
func canMapHostMemory(c *cuda.Context) (bool, error) {
	v, err := c.Device().Attribute(cuda.AttrCanMapHostMemory)
	if err != nil {
		return false, fmt.Errorf("transfer: reading can-map-host-memory: %w", err)
	}
	return v != 0, nil
}

// readResult is a measurement of the GPU reading memory with the
// pinpool_read_sum kernel.
type readResult struct {
	Bytes  int           // bytes read per run
	Runs   int           // timed runs
	Median time.Duration // median kernel time of one run, from CUDA events
	Sum    uint64        // the kernel's result (cuda.ReadSum of the bytes)
}

// GBps is Bytes/Median in 10^9 bytes per second.
func (r readResult) GBps() float64 { return PathStats{Bytes: int64(r.Bytes), Time: r.Median}.GBps() }

// measureMappedRead times the pinpool_read_sum kernel (k.ReadSumAsync)
// reading n bytes at src, runs times after one untimed run, each between two
// timing events on a fresh stream, and returns the median and the kernel's
// sum (from a last, synchronous k.ReadSum). src is meant to be mapped host
// memory (MappedPointer), read by the GPU over the bus with no copy; device
// memory gives the comparison. src must be 16-byte aligned. It checks first
// that the device can map host memory (ErrNotMapped otherwise).
func measureMappedRead(c *cuda.Context, k *testkernels.Kernels, src cuda.DevicePtr, n, runs int) (readResult, error) {
	if n <= 0 || runs <= 0 {
		return readResult{}, fmt.Errorf("%w: measureMappedRead of %d bytes, %d runs", ErrInvalidOptions, n, runs)
	}
	ok, err := canMapHostMemory(c)
	if err != nil {
		return readResult{}, err
	}
	if !ok {
		return readResult{}, fmt.Errorf("%w: device %d cannot map host memory", ErrNotMapped, c.Device().Ordinal())
	}
	s, err := c.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		return readResult{}, fmt.Errorf("transfer: %w", err)
	}
	defer s.Destroy()
	var ev [2]*cuda.Event
	for i := range ev {
		if ev[i], err = c.NewEvent(cuda.EventDefault); err != nil {
			return readResult{}, fmt.Errorf("transfer: %w", err)
		}
		defer ev[i].Destroy()
	}
	if err := k.ReadSumAsync(s, src, n); err != nil { // warm-up
		return readResult{}, fmt.Errorf("transfer: read kernel: %w", err)
	}
	times := make([]time.Duration, 0, runs)
	for range runs {
		if err := ev[0].Record(s); err != nil {
			return readResult{}, fmt.Errorf("transfer: %w", err)
		}
		if err := k.ReadSumAsync(s, src, n); err != nil {
			return readResult{}, fmt.Errorf("transfer: read kernel: %w", err)
		}
		if err := ev[1].Record(s); err != nil {
			return readResult{}, fmt.Errorf("transfer: %w", err)
		}
		if err := ev[1].Synchronize(); err != nil {
			return readResult{}, fmt.Errorf("transfer: read kernel: %w", err)
		}
		d, err := cuda.ElapsedTime(ev[0], ev[1])
		if err != nil {
			return readResult{}, fmt.Errorf("transfer: %w", err)
		}
		times = append(times, d)
	}
	slices.Sort(times)
	sum, err := k.ReadSum(s, src, n)
	if err != nil {
		return readResult{}, fmt.Errorf("transfer: read kernel: %w", err)
	}
	return readResult{Bytes: n, Runs: runs, Median: times[len(times)/2], Sum: sum}, nil
}
