package pinpool

import (
	"context"
	"io"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/hostmem"
)

// DefaultBackend returns the backend that zero Options use: pinned memory of
// CUDA device 0 (package cudahost, whose Auto method picks host registration
// or cuMemHostAlloc for the device, with huge pages when it registers:
// cudahost.NewDefault) when a CUDA driver and device are found, else locked
// host memory (NewHostBackend). No GPU is not an error. The returned
// backend may hold a CUDA context: a pool that made it closes it on Close.
func DefaultBackend() (Backend, error) {
	b, err := cudahost.NewDefault()
	if err == nil {
		return CUDABackend(b), nil
	}
	if cuda.IsNoDriver(err) {
		return NewHostBackend(hostmem.Options{}), nil
	}
	return nil, err
}

// CUDABackend adapts a cudahost.Backend to the Backend interface, for
// Options.Backend: for example mapped memory for zero-copy,
//
//	b, err := cudahost.New(cudahost.Options{Mapped: true})
//	p, err := pinpool.New(pinpool.Options{Backend: pinpool.CUDABackend(b)})
func CUDABackend(b *cudahost.Backend) Backend { return cudaBackend{b} }

type cudaBackend struct{ b *cudahost.Backend }

func (c cudaBackend) Name() string { return c.b.Name() }

func (c cudaBackend) Alloc(size int) (Allocation, error) {
	ch, err := c.b.Alloc(size)
	if err != nil {
		return nil, err
	}
	return ch, nil
}

func (c cudaBackend) AllocContext(ctx context.Context, size int, progress func(int)) (Allocation, error) {
	ch, err := c.b.AllocContext(ctx, size, progress)
	if err != nil {
		return nil, err
	}
	return ch, nil
}

func (c cudaBackend) GrowLimit() int { return c.b.GrowLimit() }

func (c cudaBackend) SplitRetries() uint64 { return c.b.SplitRetries() }

func (c cudaBackend) Close() error { return c.b.Close() }

var (
	_ ContextBackend = cudaBackend{}
	_ GrowLimiter    = cudaBackend{}
)

var _ io.Closer = cudaBackend{}
