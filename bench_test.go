package pinpool

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cudahost"
)

// benchSizes are the workloads of the pool benchmarks: the seed's frame and
// a mix of sizes from 4 KiB to 8 MiB.
var benchSizes = map[string][]int{
	"frame": {frame},
	"mixed": {4 << 10, 64 << 10, 1 << 20, frame, 8 << 20},
}

// benchBackend is the backend of the benchmarks: the default one (CUDA
// when a GPU is present, else locked host memory). Get+Release on a warm
// pool does not touch it; it only makes the memory real.
func benchBackend(b *testing.B) Backend {
	be, err := DefaultBackend()
	if err != nil {
		b.Fatal(err)
	}
	return be
}

// BenchmarkGetRelease measures Get+Release pairs on a warm pool, next to
// sync.Pool's Get+Put of a pointer. Run with -cpu 1,2,4,8,16: the pairs/s
// metric is the total over all goroutines. The tool's
// cmd/pinpool/internal/seedpool BenchmarkGetRelease sets the same loop
// beside a mutex-and-list pool, the common C++ design.
func BenchmarkGetRelease(b *testing.B) {
	for _, name := range []string{"frame", "mixed"} {
		sizes := benchSizes[name]
		b.Run("pinpool/"+name, func(b *testing.B) {
			p, err := New(Options{Backend: benchBackend(b), MinAvailable: -1, MaxIdle: -1, IdleTimeout: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			for _, n := range sizes {
				if err := p.Reserve(n, 4*runtime.GOMAXPROCS(0)); err != nil {
					b.Fatal(err)
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
		if name == "frame" {
			// The floor: sync.Pool's Get+Put of a pointer, which counts,
			// checks and locks nothing.
			b.Run("syncpool/pointer", func(b *testing.B) {
				var sp sync.Pool
				sp.New = func() any { return new([64]byte) }
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						x := sp.Get().(*[64]byte)
						sp.Put(x)
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			})
		}
	}
}

// BenchmarkGrow measures what growing costs, per GiB, for buffers of 1, 3
// (the seed's frame), 16 and 64 MiB: the pool with the default backend
// growing by 256 MiB through Reserve (allocations of up to GrowBytes) and
// through Gets that miss (allocations of one batch, GrowCount buffers),
// and, with a GPU, cuMemHostAlloc of the same buffers one by one, the
// baseline of the ratio (the goal is 5x). grow-ms/GiB counts the
// backend's allocations only, as the driver's figure does.
func BenchmarkGrow(b *testing.B) {
	const total = 256 << 20
	for _, size := range []int{1 << 20, frame, 16 << 20, 64 << 20} {
		count := total / size
		name := fmt.Sprintf("size=%.3gMiB", float64(size)/(1<<20))
		b.Run(name+"/pool-reserve", func(b *testing.B) {
			p, err := New(Options{Backend: benchBackend(b), Exact: true, MinAvailable: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.SetBytes(int64(count * size))
			for b.Loop() {
				if err := p.Reserve(size, count); err != nil {
					b.Fatal(err)
				}
				p.Trim()
			}
			st := p.Stats()
			b.ReportMetric(float64(st.GrowTime.Nanoseconds())/1e6/float64(st.BytesGrown)*(1<<30), "grow-ms/GiB")
		})
		b.Run(name+"/pool-get", func(b *testing.B) {
			p, err := New(Options{Backend: benchBackend(b), Exact: true, MinAvailable: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.SetBytes(int64(count * size))
			bufs := make([]Buffer, 0, count)
			for b.Loop() {
				for range count {
					buf, err := p.TryGet(size)
					if err != nil {
						b.Fatal(err)
					}
					bufs = append(bufs, buf)
				}
				for _, buf := range bufs {
					buf.Release()
				}
				bufs = bufs[:0]
				p.Trim()
			}
			st := p.Stats()
			b.ReportMetric(float64(st.GrowTime.Nanoseconds())/1e6/float64(st.BytesGrown)*(1<<30), "grow-ms/GiB")
		})
		b.Run(name+"/cuMemHostAlloc", func(b *testing.B) {
			be, err := cudahost.New(cudahost.Options{Method: cudahost.HostAlloc})
			if err != nil {
				b.Skipf("no CUDA device for the baseline: %v", err)
			}
			defer be.Close()
			b.SetBytes(int64(count * size))
			var took time.Duration
			chunks := make([]*cudahost.Chunk, 0, count)
			for b.Loop() {
				t0 := time.Now()
				for range count {
					c, err := be.Alloc(int(pageRound(int64(size))))
					if err != nil {
						b.Fatal(err)
					}
					chunks = append(chunks, c)
				}
				took += time.Since(t0)
				for _, c := range chunks {
					c.Free()
				}
				chunks = chunks[:0]
			}
			b.ReportMetric(float64(took.Nanoseconds())/1e6/float64(b.N*count*size)*(1<<30), "grow-ms/GiB")
		})
	}
}
