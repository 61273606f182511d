package pinpool

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/hostmem"
)

// arenaBytesEnv sets the size of BenchmarkArena's arena (default 1 GiB;
// the GPU host measures 32 and 96 GiB: PINPOOL_ARENA_BYTES=34359738368).
const arenaBytesEnv = "PINPOOL_ARENA_BYTES"

// BenchmarkArena reserves a large arena through the public API, one per
// iteration (run it with -benchtime=1x), as 2 MiB blocks, as 1 GiB blocks
// and as one buffer, on the default backend (on a GPU the CUDA one that
// cudahost.New(cudahost.Options{}) makes: registration with huge pages,
// else locked host memory), on the CUDA Register backend without huge
// pages (register+small) and on the HostAlloc backend, and reports the rate
// (GB/s), Close's time (close-ms) and, on a GPU, what a neighbour
// goroutine's 64 KiB copy every 200 µs on its own stream waited during
// the Reserve (nb-p50/p99/max-µs) and during the Close
// (nb-close-p50/p99/max-µs). It measures the growth path's choices
// (cudahost's pieces and workers, Reserve's allocations of 1 GiB, the
// trims' parallel frees). `pinpool arena` measures the same beside
// cuMemHostAlloc and the knobs one by one.
func BenchmarkArena(b *testing.B) {
	total := int64(1 << 30)
	if v := os.Getenv(arenaBytesEnv); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive byte count", arenaBytesEnv, v)
		}
		total = n
	}
	gpu := cuda.Load() == nil
	type backendCase struct {
		name string
		make func(b *testing.B) (Backend, *cuda.Context)
	}
	backends := []backendCase{{"default", func(b *testing.B) (Backend, *cuda.Context) {
		if !gpu {
			return NewHostBackend(hostmem.Options{HugePages: true}), nil
		}
		be, err := cudahost.NewDefault()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { be.Close() })
		return CUDABackend(be), be.Context()
	}}}
	if gpu {
		for _, bc := range []struct {
			name string
			opt  cudahost.Options
		}{
			{"register+small", cudahost.Options{Method: cudahost.Register, SmallPages: true}},
			{"hostalloc", cudahost.Options{Method: cudahost.HostAlloc}},
		} {
			backends = append(backends, backendCase{bc.name, func(b *testing.B) (Backend, *cuda.Context) {
				be, err := cudahost.New(bc.opt)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { be.Close() })
				return CUDABackend(be), be.Context()
			}})
		}
	}
	for _, bc := range backends {
		for _, block := range []int64{2 << 20, 1 << 30, total} { // total: one buffer
			if block > total || block == 1<<30 && total == 1<<30 || total/block > 1<<20 {
				continue
			}
			name := bc.name + "/" + sizeName(block)
			if block == total {
				name = bc.name + "/one"
			}
			b.Run(name, func(b *testing.B) {
				be, ctx := bc.make(b)
				var rate, closeMs []float64
				var lat, closeLat []time.Duration
				for range b.N {
					var nb *neighbour
					if ctx != nil {
						nb = startNeighbour(b, ctx)
					}
					p, err := New(Options{Backend: be})
					if err != nil {
						b.Fatal(err)
					}
					t0 := time.Now()
					err = p.Reserve(int(block), int(total/block))
					took := time.Since(t0)
					t1 := time.Now()
					p.Close()
					closeMs = append(closeMs, float64(time.Since(t1).Microseconds())/1e3)
					if nb != nil {
						nb.end()
						for i, at := range nb.at {
							if at.Before(t1) {
								lat = append(lat, nb.lat[i])
							} else {
								closeLat = append(closeLat, nb.lat[i])
							}
						}
					}
					if err != nil {
						b.Fatal(err)
					}
					rate = append(rate, float64(total)/took.Seconds()/1e9)
				}
				b.ReportMetric(median(rate), "GB/s")
				b.ReportMetric(median(closeMs), "close-ms")
				reportLatencies(b, "nb", lat)
				reportLatencies(b, "nb-close", closeLat)
			})
		}
	}
}

// reportLatencies reports the p50, p99 and max of a neighbour's copies
// (PREFIX-p50-µs, ...), if it made any.
func reportLatencies(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(q(0.5), prefix+"-p50-µs")
	b.ReportMetric(q(0.99), prefix+"-p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), prefix+"-max-µs")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func sizeName(n int64) string {
	if n%(1<<30) == 0 {
		return strconv.FormatInt(n>>30, 10) + "GiB"
	}
	return strconv.FormatInt(n>>20, 10) + "MiB"
}
