package transfer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cudahost"
)

// BenchmarkAfterPause times one staged 64 MiB transfer after each of
// several preludes, through a traced device: what a transfer that comes
// after a pause (a batch sent every few tens of milliseconds) pays, and
// why. The preludes:
//   - none: a transfer just before (back to back);
//   - sleep-2ms, sleep-35ms: the process idle that long;
//   - spin-35ms: the caller busy that long, the standing lanes asleep;
//   - driver-same, driver-other: four of the driver's own pageable copies
//     (what BenchmarkStagedSizes does before its cold transfer), of the
//     same host memory or of other memory, then 2 ms idle;
//   - lanes-awake-35ms: idle 35 ms, with a copier whose lanes spin through
//     the pause (LaneSpin 100 ms), so no lane has to be woken.
//
// Every iteration runs a transfer first, so each prelude starts from the
// same state. It reports GB/s and, in microseconds, the time before the
// first asynchronous copy was queued (first-us), from the first to the
// last (span-us) and after the last (drain-us).
func BenchmarkAfterPause(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	ctx := context.Background()
	const n = 64 << 20
	dev := g.devMem(b, n)
	host := randomBytes(n, 23)
	other := randomBytes(n, 24)
	tr := &trace{}
	asleep := tracedCopier(b, g, tr, Options{})
	awake := tracedCopier(b, g, tr, Options{LaneSpin: 100 * time.Millisecond})
	driver := func(d Direction, mem []byte) {
		for range 4 {
			var err error
			if d == HostToDevice {
				err = g.ctx.CopyHtoD(dev.Ptr(), mem)
			} else {
				err = g.ctx.CopyDtoH(mem, dev.Ptr())
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	preludes := []struct {
		name string
		c    *Copier
		f    func(Direction)
	}{
		{"none", asleep, func(Direction) {}},
		{"sleep-2ms", asleep, func(Direction) { time.Sleep(2 * time.Millisecond) }},
		{"sleep-35ms", asleep, func(Direction) { time.Sleep(35 * time.Millisecond) }},
		{"spin-35ms", asleep, func(Direction) {
			for t := time.Now(); time.Since(t) < 35*time.Millisecond; {
			}
		}},
		{"driver-same", asleep, func(d Direction) { driver(d, host) }},
		{"driver-other", asleep, func(d Direction) { driver(d, other) }},
		{"lanes-awake-35ms", awake, func(Direction) { time.Sleep(35 * time.Millisecond) }},
	}
	for _, d := range []Direction{HostToDevice, DeviceToHost} {
		for _, p := range preludes {
			b.Run(fmt.Sprintf("%v/%s", d, p.name), func(b *testing.B) {
				defer allCPUs()()
				o := op{d, dev.Ptr(), host}
				var sum traceSummary
				for b.Loop() {
					if err := p.c.transfer(ctx, o, false); err != nil {
						b.Fatal(err)
					}
					p.f(d)
					tr.reset()
					t0 := time.Now()
					if err := p.c.transfer(ctx, o, false); err != nil {
						b.Fatal(err)
					}
					sum.add(tr.summary(time.Since(t0)))
				}
				reportTraced(b, sum, n, true)
			})
		}
	}
}

// BenchmarkColdSource moves 64 and 256 MiB host to device back to back,
// through a traced device, from the same memory every time ("warm": it
// stays in the last-level cache) and from the next window of a 1 GiB
// buffer every time ("cold": read from memory, as a data loader's batches
// are), with the default copier, beside the driver's own copy. It reports
// GB/s, first-us, span-us and drain-us as BenchmarkAfterPause does.
func BenchmarkColdSource(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	ctx := context.Background()
	const total = 1 << 30
	dev := g.devMem(b, 256<<20)
	big := randomBytes(total, 25)
	tr := &trace{}
	ways := []struct {
		name string
		c    *Copier
	}{{"driver", nil}, {"default", tracedCopier(b, g, tr, Options{})}}
	for _, n := range []int{64 << 20, 256 << 20} {
		for _, src := range []string{"warm", "cold"} {
			for _, w := range ways {
				b.Run(fmt.Sprintf("size=%s/%s/%s", sizeName(n), src, w.name), func(b *testing.B) {
					defer allCPUs()()
					var sum traceSummary
					i := 0
					for b.Loop() {
						mem := big[:n]
						if src == "cold" {
							i = (i + 1) % (total / n)
							mem = big[i*n : (i+1)*n]
						}
						tr.reset()
						t0 := time.Now()
						var err error
						if w.c == nil {
							err = g.ctx.CopyHtoD(dev.Ptr(), mem)
						} else {
							err = w.c.transfer(ctx, op{HostToDevice, dev.Ptr(), mem}, false)
						}
						if err != nil {
							b.Fatal(err)
						}
						sum.add(tr.summary(time.Since(t0)))
					}
					reportTraced(b, sum, n, w.c != nil)
				})
			}
		}
	}
}

// tracedCopier is a prewarmed copier over g's context with options o
// (DirectBelow off) whose copies and waits tr records; it closes when the
// benchmark ends.
func tracedCopier(b *testing.B, g *gpu, tr *trace, o Options) *Copier {
	o.DirectBelow, o.Prewarm = -1, true
	return g.copierOn(b, tracedDevice{cudaDevice{g.ctx}, tr}, o, defaultTuning())
}

// reportTraced reports the GB/s of b.N transfers of n bytes whose traces
// sum to sum and, when traced (a traced copier ran them), the time per
// transfer before the first copy was queued (first-us), from the first to
// the last (span-us) and after the last (drain-us).
func reportTraced(b *testing.B, sum traceSummary, n int, traced bool) {
	b.ReportMetric(float64(n)*float64(b.N)/sum.total.Seconds()/1e9, "GB/s")
	if !traced {
		return
	}
	us := func(v time.Duration) float64 { return float64(v.Microseconds()) / float64(b.N) }
	b.ReportMetric(us(sum.first), "first-us")
	b.ReportMetric(us(sum.last-sum.first), "span-us")
	b.ReportMetric(us(sum.total-sum.last), "drain-us")
}
