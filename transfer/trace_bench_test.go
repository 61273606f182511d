package transfer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cudahost"
)

// BenchmarkStagedTrace times where a staged transfer's time goes, through
// a traced device (trace_test.go) over the GPU: in each iteration four
// transfers back to back after a pause (the first finds the lanes asleep,
// "cold"; the others "warm"), at 16, 64 and 256 MiB, both directions,
// default options with DirectBelow off. It reports, in microseconds and
// averaged over the warm transfers, the time before the first
// asynchronous copy was queued (first-us), between the first and the last
// (span-us), after the last until the transfer returned (drain-us), the
// same three for the cold transfer (cold-first-us, cold-span-us,
// cold-drain-us), and the rate at which bytes were queued between the
// first and the last copy (queue-GB/s), beside the transfer's GB/s. The
// DMA of the last copy is part of drain-us: on the H200 a 2 MiB chunk
// takes about 38 µs at the link's speed.
func BenchmarkStagedTrace(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	sizes := []int{16 << 20, 64 << 20, 256 << 20}
	maxN := slices.Max(sizes)
	dev := g.devMem(b, maxN)
	host := randomBytes(maxN, 22)
	tr := &trace{}
	c, err := newCopier(g.pool, tracedDevice{cudaDevice{g.ctx}, tr}, Options{DirectBelow: -1, Prewarm: true}, defaultTuning())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	ctx := context.Background()
	for _, n := range sizes {
		for _, d := range []Direction{HostToDevice, DeviceToHost} {
			b.Run(fmt.Sprintf("size=%s/%v", sizeName(n), d), func(b *testing.B) {
				defer allCPUs()()
				var cold, warm traceSummary
				warmN := 0
				for b.Loop() {
					time.Sleep(2 * time.Millisecond) // the lanes fall asleep
					for k := range 4 {
						tr.reset()
						t0 := time.Now()
						if d == HostToDevice {
							err = c.ToDevice(ctx, dev.Ptr(), host[:n])
						} else {
							err = c.FromDevice(ctx, host[:n], dev.Ptr())
						}
						if err != nil {
							b.Fatal(err)
						}
						s := tr.summary(time.Since(t0))
						sum := &warm
						if k == 0 {
							sum = &cold
						} else {
							warmN++
						}
						sum.first += s.first
						sum.last += s.last
						sum.total += s.total
						sum.bytes += s.bytes
					}
				}
				us := func(v time.Duration, k int) float64 { return float64(v.Microseconds()) / float64(k) }
				b.ReportMetric(us(warm.first, warmN), "first-us")
				b.ReportMetric(us(warm.last-warm.first, warmN), "span-us")
				b.ReportMetric(us(warm.total-warm.last, warmN), "drain-us")
				b.ReportMetric(us(cold.first, b.N), "cold-first-us")
				b.ReportMetric(us(cold.last-cold.first, b.N), "cold-span-us")
				b.ReportMetric(us(cold.total-cold.last, b.N), "cold-drain-us")
				b.ReportMetric(float64(warm.bytes)/(warm.last-warm.first).Seconds()/1e9, "queue-GB/s")
				b.ReportMetric(float64(warm.bytes)/warm.total.Seconds()/1e9, "GB/s")
			})
		}
	}
}
