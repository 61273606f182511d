package seedpool_test

import (
	"context"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cmd/pinpool/internal/seedpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"golang.org/x/sys/unix"
)

// These tests and benchmarks set pinpool's pool beside the mutex-and-list
// design of this package on the same memory. They live here, not in the
// root package, so that no library package imports a package of the tool.

const pageSize = 4096

// countingBackend is a pinpool.Backend over plain anonymous mappings (no
// locked memory, so that the comparison runs under any RLIMIT_MEMLOCK)
// that counts the bytes it holds and its peak.
type countingBackend struct {
	mu            sync.Mutex
	live, peak    int64
	allocs, frees int
}

func (c *countingBackend) Name() string { return "counting" }

func (c *countingBackend) Alloc(size int) (pinpool.Allocation, error) {
	m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.allocs++
	c.live += int64(size)
	c.peak = max(c.peak, c.live)
	c.mu.Unlock()
	return &countingAlloc{c: c, m: m}, nil
}

func (c *countingBackend) stats() (peak int64, allocs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak, c.allocs
}

type countingAlloc struct {
	c *countingBackend
	m []byte
}

func (a *countingAlloc) Bytes() []byte { return a.m }

func (a *countingAlloc) DevicePointer() (uintptr, error) { return 0, pinpool.ErrNotMapped }

func (a *countingAlloc) Free() error {
	a.c.mu.Lock()
	a.c.frees++
	a.c.live -= int64(len(a.m))
	a.c.mu.Unlock()
	return unix.Munmap(a.m)
}

// seedOn returns this package's pool allocating from be, in whole pages
// as the driver maps them.
func seedOn(be pinpool.Backend, opt seedpool.Options) *seedpool.Pool {
	return seedpool.New(seedpool.NewFuncAllocator(func(n int) ([]byte, func() error, error) {
		a, err := be.Alloc(n)
		if err != nil {
			return nil, nil, err
		}
		return a.Bytes(), a.Free, nil
	}, pageSize), opt)
}

// poolGet adapts a pinpool pool to Workload.Run.
func poolGet(p *pinpool.Pool) func(n int) (func() error, error) {
	return func(n int) (func() error, error) {
		b, err := p.Get(context.Background(), n)
		if err != nil {
			return nil, err
		}
		return b.Release, nil
	}
}

// short reports whether the workload runs its short version: unless
// PINPOOL_SOAK is set (the root package's soak switch), or with -short.
func short() bool { return os.Getenv("PINPOOL_SOAK") == "" || testing.Short() }

// TestSeedWorkload runs the seed test (10 goroutines x 100 frames with its
// growing sleep, scaled down) on pinpool's pool and on this package's pool,
// with the same kind of memory: pinpool must hold no more at its peak than
// the growths that cover one buffer per goroutine, and after warm-up
// allocate nothing new.
func TestSeedWorkload(t *testing.T) {
	w := seedpool.SeedWorkload()
	w.SleepScale = 0.1
	if short() {
		w.Iterations = 30
	}
	be := &countingBackend{}
	p, err := pinpool.New(pinpool.Options{Backend: be, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	res, err := w.Run(poolGet(p))
	if err != nil || res.Failures != 0 {
		t.Fatalf("pinpool: %v, %d failures", err, res.Failures)
	}
	_, warmAllocs := be.stats()
	res2, err := w.Run(poolGet(p))
	if err != nil || res2.Failures != 0 {
		t.Fatalf("pinpool, second run: %v, %d failures", err, res2.Failures)
	}
	poolPeak, allocs := be.stats()
	if allocs != warmAllocs {
		t.Errorf("after warm-up pinpool allocated %d more times", allocs-warmAllocs)
	}

	seedBackend := &countingBackend{}
	seed := seedOn(seedBackend, seedpool.Options{})
	defer seed.Destroy()
	for range 2 {
		if _, err := w.Run(seed.Get); err != nil {
			t.Fatal(err)
		}
	}
	seedPeak, _ := seedBackend.stats()
	t.Logf("peak held: pinpool %d bytes, mutex-and-list pool %d bytes; pinpool %v", poolPeak, seedPeak, res2)
	// Both grow four buffers at a time, so neither needs more than the growths that cover one buffer
	// per goroutine. The two peaks are not compared: each is the overlap its own run happened to
	// have (on a loaded machine the mutex-and-list pool's goroutines once overlapped less, and it
	// held 8 buffers to pinpool's 12).
	buf := int64((seedpool.FrameSize + os.Getpagesize() - 1) / os.Getpagesize() * os.Getpagesize())
	bound := int64((w.Goroutines+pinpool.DefaultGrowCount-1)/pinpool.DefaultGrowCount*pinpool.DefaultGrowCount) * buf
	if poolPeak > bound {
		t.Errorf("pinpool held %d bytes at peak, more than the %d that %d goroutines need in growths of %d", poolPeak, bound, w.Goroutines, pinpool.DefaultGrowCount)
	}
}

// TestGPUSeedWorkload runs the seed test on CUDA memory through pinpool's
// default CUDA backend: no failures, and no driver allocation after
// warm-up. It skips without a GPU.
func TestGPUSeedWorkload(t *testing.T) {
	be, err := cudahost.New(cudahost.Options{Method: cudahost.Auto})
	if err != nil {
		if cuda.IsNoDriver(err) {
			t.Skipf("GPU test skipped: no CUDA driver or device (%v); see docs/gpu-testing.md", err)
		}
		t.Fatal(err)
	}
	defer be.Close()
	p, err := pinpool.New(pinpool.Options{Backend: pinpool.CUDABackend(be), Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for run := range 2 {
		before := p.Stats().Grows
		w := seedpool.SeedWorkload()
		w.SleepScale = 0.1
		res, err := w.Run(poolGet(p))
		if err != nil || res.Failures != 0 {
			t.Fatalf("run %d: %v, %d failures", run, err, res.Failures)
		}
		grows := p.Stats().Grows - before
		t.Logf("run %d: %v; %d driver allocations", run, res, grows)
		if run == 1 && grows != 0 {
			t.Fatalf("after warm-up: %d driver allocations", grows)
		}
	}
}

// compareSizes are the workloads of BenchmarkGetRelease: the seed's frame
// and a mix of sizes from 4 KiB to 8 MiB.
var compareSizes = map[string][]int{
	"frame": {seedpool.FrameSize},
	"mixed": {4 << 10, 64 << 10, 1 << 20, seedpool.FrameSize, 8 << 20},
}

// BenchmarkGetRelease measures Get+Release pairs on a warm pinpool pool
// beside Alloc+Free pairs on this package's pool, both on pinpool's default
// backend (CUDA with a GPU, else locked host memory). Run with
// -cpu 1,2,4,8,16: the pairs/s metric is the total over all goroutines.
// The root package's BenchmarkGetRelease measures pinpool alone.
func BenchmarkGetRelease(b *testing.B) {
	for _, name := range []string{"frame", "mixed"} {
		sizes := compareSizes[name]
		b.Run("pinpool/"+name, func(b *testing.B) {
			be, err := pinpool.DefaultBackend()
			if err != nil {
				b.Fatal(err)
			}
			p, err := pinpool.New(pinpool.Options{Backend: be, MinAvailable: -1, MaxIdle: -1, IdleTimeout: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			for _, n := range sizes {
				if err := p.Reserve(n, 4*runtime.GOMAXPROCS(0)); err != nil {
					b.Skipf("Reserve: %v", err)
				}
			}
			misses := p.Stats().Misses
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					buf, err := p.Get(context.Background(), sizes[i%len(sizes)])
					if err != nil {
						b.Error(err)
						return
					}
					buf.Release()
					i++
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			if m := p.Stats().Misses - misses; m != 0 {
				b.Fatalf("%d misses in a warm loop", m)
			}
		})
		b.Run("seed/"+name, func(b *testing.B) {
			be, err := pinpool.DefaultBackend()
			if err != nil {
				b.Fatal(err)
			}
			seed := seedOn(be, seedpool.Options{MaxIdle: 1 << 20})
			defer seed.Destroy()
			// Warm: enough blocks of every size for every goroutine.
			var warm [][]byte
			var wsz []int
			for _, n := range sizes {
				for range 4 * runtime.GOMAXPROCS(0) {
					m, err := seed.Alloc(n)
					if err != nil {
						b.Skipf("warm-up: %v", err)
					}
					warm, wsz = append(warm, m), append(wsz, n)
				}
			}
			for i, m := range warm {
				seed.Free(wsz[i], m)
			}
			allocs := seed.Allocations()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					n := sizes[i%len(sizes)]
					m, err := seed.Alloc(n)
					if err != nil {
						b.Error(err)
						return
					}
					seed.Free(n, m)
					i++
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			if a := seed.Allocations() - allocs; a != 0 {
				b.Fatalf("%d allocations in a warm loop", a)
			}
		})
	}
}
