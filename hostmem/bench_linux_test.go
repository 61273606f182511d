package hostmem

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

var benchSizes = []struct {
	name string
	size int
}{
	{"4KiB", 4 << 10},
	{"3MiB", 3 << 20},
	{"64MiB", 64 << 20},
	{"1GiB", 1 << 30},
}

// memAvailable returns MemAvailable from /proc/meminfo in bytes (0 if unknown).
func memAvailable() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	kb, _, _ := parseStatusKB(f, "MemAvailable")
	return kb << 10
}

// benchRegion measures make (Alloc or Map) for each size, with one prefault
// worker and with the default, reporting ms per GiB. Unmap is not timed.
func benchRegion(b *testing.B, make func(int, Options) (*Region, error)) {
	for _, sz := range benchSizes {
		for _, workers := range []int{1, 0} {
			wname := "default"
			if workers == 1 {
				wname = "1"
			}
			b.Run(fmt.Sprintf("size=%s/workers=%s", sz.name, wname), func(b *testing.B) {
				if sz.size >= 1<<30 && memAvailable() < 3*uint64(sz.size) {
					b.Skipf("MemAvailable %d bytes is below 3x %d", memAvailable(), sz.size)
				}
				b.SetBytes(int64(sz.size))
				var total time.Duration
				for b.Loop() {
					start := time.Now()
					r, err := make(sz.size, Options{PrefaultWorkers: workers})
					total += time.Since(start)
					if errors.Is(err, ErrLockLimit) {
						b.Skipf("lock limit too small for %s: %v", sz.name, err)
					}
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if err := r.Unmap(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				perOp := float64(total.Nanoseconds()) / float64(b.N)
				b.ReportMetric(perOp/1e6*float64(1<<30)/float64(sz.size), "ms/GiB")
			})
		}
	}
}

func BenchmarkAlloc(b *testing.B) { benchRegion(b, Alloc) }

func BenchmarkMap(b *testing.B) { benchRegion(b, Map) }

// BenchmarkAllocTouch is BenchmarkAlloc with one written byte per page
// instead of MADV_POPULATE_WRITE (the path taken on kernels before 5.14).
func BenchmarkAllocTouch(b *testing.B) { withTouch(func() { benchRegion(b, Alloc) }) }

func BenchmarkAllocHugePages(b *testing.B) {
	benchRegion(b, func(n int, opt Options) (*Region, error) {
		opt.HugePages = true
		return Alloc(n, opt)
	})
}
