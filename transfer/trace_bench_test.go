package transfer

import (
	"context"
	"flag"
	"fmt"
	rtrace "runtime/trace"
	"slices"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
)

// traceCopiers are the copiers BenchmarkStagedTrace compares: the default
// one, and variants of its tuning or options.
var traceCopiers = []struct {
	name string
	tune func(*tuning)
	opt  func(*Options)
}{
	{"default", nil, nil},
}

// BenchmarkStagedTrace times where a staged transfer's time goes, through
// a traced device (trace_test.go) over the GPU: in each iteration four
// transfers back to back after a pause (the first finds the lanes asleep,
// "cold"; the others "warm"), at a 1080p frame, 16, 64 and 256 MiB, both directions,
// with each copier of traceCopiers (DirectBelow off), and the same four
// from a pool buffer (one asynchronous copy: the link's speed, "pinned").
// It reports, in microseconds and averaged over the warm transfers, the
// time before the first asynchronous copy was queued (first-us), between
// the first and the last (span-us), after the last until the transfer
// returned (drain-us), the same three for the cold transfer
// (cold-first-us, cold-span-us, cold-drain-us), and the rate at which
// bytes were queued between the first and the last copy (queue-GB/s),
// beside the transfer's GB/s (warm) and cold-GB/s. With -test.v it logs
// the timeline of one warm transfer: when each copy was queued and when
// each event wait returned. Under -test.trace each transfer is a region
// "transfer" and each copy and wait a log event. The DMA of the last copy is part of drain-us:
// on the H200 a 2 MiB chunk takes about 38 µs at the link's speed.
func BenchmarkStagedTrace(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	sizes := []int{frameBytes, 16 << 20, 64 << 20, 256 << 20}
	maxN := slices.Max(sizes)
	dev := g.devMem(b, maxN)
	host := randomBytes(maxN, 22)
	pinned := g.pinnedMem(b, maxN)
	copy(pinned, host)
	for _, tc := range traceCopiers {
		tr := &trace{}
		tu := defaultTuning()
		if tc.tune != nil {
			tc.tune(&tu)
		}
		opt := Options{DirectBelow: -1, Prewarm: true}
		if tc.opt != nil {
			tc.opt(&opt)
		}
		c := g.copierOn(b, tracedDevice{cudaDevice{g.ctx}, tr}, opt, tu)
		for _, n := range sizes {
			for _, d := range []Direction{HostToDevice, DeviceToHost} {
				for _, src := range []string{"pageable", "pinned"} {
					if src == "pinned" && tc.name != traceCopiers[0].name {
						continue
					}
					mem := host[:n]
					if src == "pinned" {
						mem = pinned[:n]
					}
					name := sizeName(n)
					if n == frameBytes {
						name = "frame"
					}
					b.Run(fmt.Sprintf("copier=%s/size=%s/%v/%s", tc.name, name, d, src), func(b *testing.B) {
						defer allCPUs()()
						traceTransfers(b, c, tr, d, dev.Ptr(), mem)
					})
				}
			}
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// traceGapFlag is a pause before each warm transfer of BenchmarkStagedTrace,
// to compare a download that follows another at once with one that comes
// later.
var traceGapFlag = flag.Duration("transfer.tracegap", 0, "BenchmarkStagedTrace: busy-wait this long before each warm transfer")

// traceTransfers is one leaf of BenchmarkStagedTrace.
func traceTransfers(b *testing.B, c *Copier, tr *trace, d Direction, dev cuda.DevicePtr, mem []byte) {
	ctx := context.Background()
	var cold, warm traceSummary
	warmN := 0
	var timeline string
	rtrace.Log(ctx, "leaf", b.Name())
	for b.Loop() {
		time.Sleep(2 * time.Millisecond) // the lanes fall asleep
		for k := range 4 {
			if k > 0 && *traceGapFlag > 0 {
				for t := time.Now(); time.Since(t) < *traceGapFlag; {
				}
			}
			tr.reset()
			t0 := time.Now()
			var err error
			rtrace.WithRegion(ctx, "transfer", func() { err = c.transfer(ctx, op{d, dev, mem}, false) })
			if err != nil {
				b.Fatal(err)
			}
			took := time.Since(t0)
			s := tr.summary(took)
			sum := &warm
			if k == 0 {
				sum = &cold
			} else {
				warmN++
				if k == 3 {
					timeline = tr.timeline(took)
				}
			}
			sum.add(s)
		}
	}
	us := func(v time.Duration, k int) float64 { return float64(v.Microseconds()) / float64(k) }
	b.ReportMetric(us(warm.first, warmN), "first-us")
	b.ReportMetric(us(warm.last-warm.first, warmN), "span-us")
	b.ReportMetric(us(warm.total-warm.last, warmN), "drain-us")
	b.ReportMetric(us(cold.first, b.N), "cold-first-us")
	b.ReportMetric(us(cold.last-cold.first, b.N), "cold-span-us")
	b.ReportMetric(us(cold.total-cold.last, b.N), "cold-drain-us")
	if warm.last > warm.first {
		b.ReportMetric(float64(warm.bytes)/(warm.last-warm.first).Seconds()/1e9, "queue-GB/s")
	}
	b.ReportMetric(float64(warm.bytes)/warm.total.Seconds()/1e9, "GB/s")
	b.ReportMetric(float64(cold.bytes)/cold.total.Seconds()/1e9, "cold-GB/s")
	b.Log(timeline)
}
