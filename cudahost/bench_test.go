package cudahost

import (
	"fmt"
	"testing"
	"time"

	"github.com/pinpool/pinpool/hostmem"
)

// BenchmarkGrow measures what a pool pays to grow by one chunk and to give it
// back: Alloc plus Free, for each method, at 3 MiB, 64 MiB and 1 GiB. The
// hostalloc case is the raw cuMemHostAlloc + cuMemFreeHost baseline, so the
// register/hostalloc ratio shows in one run. Metrics: ms/GiB for the pair,
// and alloc-ms/GiB and free-ms/GiB for each half.
func BenchmarkGrow(b *testing.B) {
	sizes := []struct {
		name string
		n    int
	}{{"3MiB", 3 << 20}, {"64MiB", 64 << 20}, {"1GiB", 1 << 30}}
	methods := []struct {
		name string
		opt  Options
	}{
		{"hostalloc", Options{Method: HostAlloc}},
		{"register", Options{Method: Register}},
		{"register+huge", Options{Method: Register, HugePages: true}},
	}
	for _, sz := range sizes {
		for _, m := range methods {
			b.Run(fmt.Sprintf("size=%s/method=%s", sz.name, m.name), func(b *testing.B) {
				if sz.n >= 1<<30 {
					if mi, err := hostmem.ReadMemInfo(); err == nil && mi.Available < 3*uint64(sz.n) {
						b.Skipf("MemAvailable %d bytes is below 3x %d", mi.Available, sz.n)
					}
				}
				be := newOrSkip(b, m.opt)
				b.SetBytes(int64(sz.n))
				var alloc, free time.Duration
				for b.Loop() {
					t0 := time.Now()
					c, err := be.Alloc(sz.n)
					if err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					if err := c.Free(); err != nil {
						b.Fatal(err)
					}
					alloc += t1.Sub(t0)
					free += time.Since(t1)
				}
				perGiB := func(d time.Duration) float64 {
					return float64(d.Nanoseconds()) / 1e6 / float64(b.N) * float64(1<<30) / float64(sz.n)
				}
				b.ReportMetric(perGiB(alloc+free), "ms/GiB")
				b.ReportMetric(perGiB(alloc), "alloc-ms/GiB")
				b.ReportMetric(perGiB(free), "free-ms/GiB")
			})
		}
	}
}
