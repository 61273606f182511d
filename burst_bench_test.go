package pinpool

import (
	"context"
	rtrace "runtime/trace"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/hostmem"
	"github.com/pinpool/pinpool/internal/pause"
)

// burstWorkloads are the loads of issue 16: a queue of frames that fills
// to 45 and drains to 0 or to 20, and frames with 64 KiB and 16 MiB
// buffers beside them.
var burstWorkloads = []struct {
	name      string
	sizes     []int
	low, hold int
}{
	{"0-45-0", []int{frame}, 0, 45},
	{"20-45-20", []int{frame}, 20, 45},
	{"mixed", []int{frame, 64 << 10, 16 << 20}, 0, 45},
}

// burstPolicies are the idle policies compared: the defaults (decay), no
// cap at all, and the seed's cliff, which the pool had before decay: idle
// buffers above MaxIdle freed as soon as they are released (seedCliff).
var burstPolicies = []struct {
	name  string
	opt   Options
	cliff bool
}{
	{"default", Options{}, false},
	{"MaxIdle=-1", Options{MaxIdle: -1}, false},
	{"seed-cliff", Options{IdleDecay: -1}, true},
}

// seedCliff is the idle policy the pool had before decay, for comparison:
// every class trimmed down to MaxIdle idle buffers at once.
func seedCliff(p *Pool) func() {
	return func() {
		for _, c := range p.classList() {
			if over := c.idleCount() - p.opt.MaxIdle; over > 0 {
				c.trimClass(trimPlan{want: int64(over) * c.size, keep: int(c.reserved.Load()), reason: TrimCap})
			}
		}
	}
}

// BenchmarkBurst runs the burst workloads, one cycle per iteration with a
// 2 ms pause at the top and at the bottom, on the host backend and (with
// a GPU) on both CUDA backends, while on a GPU a neighbour goroutine of the
// same process times one 64 KiB pinned copy to the device every 200 µs on
// its own stream. It reports cycles/s, growths/s and the share of wall
// time spent growing after one warm-up cycle, and the neighbour's p50 and
// p99 latency; the "no-burst" case is the neighbour alone, the figure the
// others are compared with.
//
//	go test -run '^$' -bench Burst -benchtime 3s
func BenchmarkBurst(b *testing.B) {
	for _, bk := range []string{"host", "hostalloc", "register"} {
		b.Run(bk, func(b *testing.B) {
			be, cctx := burstBackend(b, bk)
			if cctx != nil {
				b.Run("no-burst", func(b *testing.B) {
					nb := startNeighbour(b, cctx)
					for b.Loop() {
						time.Sleep(4 * time.Millisecond)
					}
					nb.report(b)
				})
			}
			for _, w := range burstWorkloads {
				for _, pol := range burstPolicies {
					b.Run(w.name+"/"+pol.name, func(b *testing.B) {
						o := pol.opt
						o.Backend = be
						p, err := New(o)
						if err != nil {
							b.Fatal(err)
						}
						defer p.Close()
						var then func()
						if pol.cliff {
							then = seedCliff(p)
						}
						burstThen(b, p, w.sizes, w.low, w.hold, 1, 0, then) // warm-up
						warm := p.Stats()
						var nb *neighbour
						if cctx != nil {
							nb = startNeighbour(b, cctx)
						}
						start := time.Now()
						b.ResetTimer()
						for i := 0; i < b.N; i++ {
							burstThen(b, p, w.sizes, w.low, w.hold, 1, 2*time.Millisecond, then)
						}
						b.StopTimer()
						wall := time.Since(start)
						st := p.Stats()
						b.ReportMetric(float64(b.N)/wall.Seconds(), "cycles/s")
						b.ReportMetric(float64(st.Grows-warm.Grows)/wall.Seconds(), "grows/s")
						b.ReportMetric(100*float64(st.GrowTime-warm.GrowTime)/float64(wall), "%growing")
						b.ReportMetric(float64(st.Trims-warm.Trims)/wall.Seconds(), "trims/s")
						if nb != nil {
							nb.report(b)
						}
					})
				}
			}
		})
	}
}

// burstBackend returns the backend of one BenchmarkBurst case, and the
// CUDA context for the neighbour (nil on the host backend); it skips the
// CUDA cases without a GPU.
func burstBackend(b *testing.B, name string) (Backend, *cuda.Context) {
	if name == "host" {
		return NewHostBackend(hostmem.Options{}), nil
	}
	m := cudahost.HostAlloc
	if name == "register" {
		m = cudahost.Register
	}
	be := gpuBackend(b, m)
	return CUDABackend(be), be.Context()
}

// neighbour is another user of the GPU in the same process: it copies 64
// KiB from pinned memory to the device every 200 µs on its own stream and
// times each copy, until the benchmark ends.
type neighbour struct {
	stop chan struct{}
	done sync.WaitGroup
	lat  []time.Duration
	at   []time.Time // when each copy started
	err  error
}

func startNeighbour(b *testing.B, ctx *cuda.Context) *neighbour {
	const n = 64 << 10
	host, err := ctx.HostAlloc(n, 0)
	if err != nil {
		b.Fatal(err)
	}
	dev, err := ctx.MemAlloc(n)
	if err != nil {
		b.Fatal(err)
	}
	s, err := ctx.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		b.Fatal(err)
	}
	nb := &neighbour{stop: make(chan struct{})}
	nb.done.Go(func() {
		defer s.Destroy()
		defer dev.Free()
		defer host.Free()
		// An absolute schedule waited with package pause: time.After
		// fires about once a millisecond when nothing else runs.
		next := time.Now()
		for {
			select {
			case <-nb.stop:
				return
			default:
			}
			next = next.Add(200 * time.Microsecond)
			if now := time.Now(); next.Before(now) {
				next = now // late (a stalled copy): no burst to catch up
			}
			pause.Until(next)
			// A region per copy, so that an execution trace (-test.trace) shows what a slow
			// copy waited for.
			reg := rtrace.StartRegion(context.Background(), "neighbour copy")
			t0 := time.Now()
			if err := s.CopyHtoDAsync(dev.Ptr(), host.Bytes()); err != nil {
				nb.err = err
				return
			}
			if err := s.Synchronize(); err != nil {
				nb.err = err
				return
			}
			reg.End()
			nb.lat = append(nb.lat, time.Since(t0))
			nb.at = append(nb.at, t0)
		}
	})
	b.Cleanup(nb.end)
	return nb
}

func (nb *neighbour) end() {
	select {
	case <-nb.stop:
	default:
		close(nb.stop)
	}
	nb.done.Wait()
}

// report stops the neighbour and reports its copies' p50 and p99.
func (nb *neighbour) report(b *testing.B) {
	nb.end()
	if nb.err != nil {
		b.Fatalf("neighbour's copy: %v", nb.err)
	}
	if len(nb.lat) == 0 {
		return
	}
	slices.Sort(nb.lat)
	q := func(f float64) float64 { return float64(nb.lat[int(f*float64(len(nb.lat)-1))].Microseconds()) }
	b.ReportMetric(q(0.5), "nb-p50-µs")
	b.ReportMetric(q(0.99), "nb-p99-µs")
	b.ReportMetric(float64(len(nb.lat)), "nb-copies")
}
