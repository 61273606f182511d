package pinpool

import (
	"io"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/hostmem"
)

// DefaultBackend returns the backend that zero Options use: pinned memory of
// CUDA device 0 (package cudahost, whose Auto method picks host registration
// or cuMemHostAlloc for the device) when a CUDA driver and device are found,
// else locked host memory (NewHostBackend). When registration is picked,
// huge pages are advised too: on the H200 host that halves the cost of
// growing (about 160-200 ms/GiB against 310-360 ms/GiB without, and 370-550
// ms/GiB for cuMemHostAlloc; BenchmarkGrow in cudahost). No GPU is not an
// error. The returned backend may hold a CUDA context: a pool that made it
// closes it on Close.
func DefaultBackend() (Backend, error) {
	b, err := cudahost.New(cudahost.Options{})
	if err == nil {
		if b.Options().Method == cudahost.Register {
			if hb, herr := cudahost.New(cudahost.Options{Method: cudahost.Register, HugePages: true}); herr == nil {
				b.Close()
				b = hb
			}
		}
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

func (c cudaBackend) Close() error { return c.b.Close() }

var _ io.Closer = cudaBackend{}
