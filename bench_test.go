package pinpool

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/pinpool/pinpool/internal/seedpool"
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
// the seed pool's design (one mutex, a map of lists) on the same memory.
// Run with -cpu 1,2,4,8,16: the pairs/s metric is the total over all
// goroutines.
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
		b.Run("seed/"+name, func(b *testing.B) {
			be := benchBackend(b)
			seed := seedpool.New(seedpool.NewFuncAllocator(func(n int) ([]byte, func() error, error) {
				a, err := be.Alloc(n)
				if err != nil {
					return nil, nil, err
				}
				return a.Bytes(), a.Free, nil
			}, pageSize), seedpool.Options{MaxIdle: 1 << 20})
			defer seed.Destroy()
			// Warm: enough blocks of every size for every goroutine.
			var warm [][]byte
			var wsz []int
			for _, n := range sizes {
				for range 4 * 64 {
					m, err := seed.Alloc(n)
					if err != nil {
						b.Fatal(err)
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

// BenchmarkGrow measures growing the pool by 1 GiB (16 buffers of 64 MiB,
// then Trim): the cost a miss pays, per GiB, with the default backend.
func BenchmarkGrow(b *testing.B) {
	for _, size := range []int{3 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("buffers=%dMiB", size>>20), func(b *testing.B) {
			p, err := New(Options{Backend: benchBackend(b), Exact: true, MinAvailable: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			count := (1 << 30) / size
			b.SetBytes(1 << 30)
			for b.Loop() {
				if err := p.Reserve(size, count); err != nil {
					b.Fatal(err)
				}
				p.Trim()
			}
			st := p.Stats()
			b.ReportMetric(float64(st.GrowTime.Milliseconds())/float64(st.BytesGrown)*(1<<30), "grow-ms/GiB")
		})
	}
}
