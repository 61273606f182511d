package seedpool

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// BenchmarkSeedPool measures the seed's pool on hits only: the pool is
// pre-warmed with enough idle blocks of every size for each of the
// RunParallel goroutines (GOMAXPROCS of them) to hold one, and the Allocator
// is a zero-latency FakeAllocator that the loop never reaches. Run it with
// -cpu 1,2,4,8,16 to see the single mutex collapse; ns/op is wall time per
// Alloc+Free pair, like the figures of scripts/ref/seedpool.cu.
func BenchmarkSeedPool(b *testing.B) {
	b.Run("frame", func(b *testing.B) {
		benchSizes(b, []int{FrameSize})
	})
	b.Run("mixed", func(b *testing.B) {
		benchSizes(b, []int{4 << 10, 64 << 10, 1 << 20, FrameSize, 8 << 20})
	})
}

func benchSizes(b *testing.B, sizes []int) {
	fa := &FakeAllocator{}
	p := New(fa, Options{})
	warm := runtime.GOMAXPROCS(0)
	if warm > DefaultMaxIdle {
		b.Fatalf("GOMAXPROCS %d: more idle blocks needed than MaxIdle %d keeps", warm, DefaultMaxIdle)
	}
	for _, size := range sizes {
		bufs := make([][]byte, warm)
		for i := range bufs {
			bufs[i] = mustAlloc(b, p, size)
		}
		for _, buf := range bufs {
			mustFree(b, p, size, buf)
		}
	}
	allocs := p.Allocations()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) // spread the goroutines over the sizes
		for pb.Next() {
			size := sizes[i%len(sizes)]
			i++
			buf, err := p.Alloc(size)
			if err != nil {
				b.Error(err)
				return
			}
			if err := p.Free(size, buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "pairs/s")
	}
	if p.Allocations() != allocs {
		b.Errorf("the loop missed: %d Allocator calls", p.Allocations()-allocs)
	}
	if err := p.Destroy(); err != nil {
		b.Fatal(err)
	}
}
