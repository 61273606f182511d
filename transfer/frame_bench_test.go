package transfer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cudahost"
)

// frameBytes is one 1080p NV12 frame of the seed article (1920×1080, 12
// bits a pixel): 3,110,400 bytes.
const frameBytes = 1920 * 1080 * 3 / 2

// stagedSizes are the sizes of BenchmarkStagedVsPageable: from 1 MiB, the
// frame size among them, to 256 MiB.
var stagedSizes = []int{1 << 20, 2 << 20, frameBytes, 4 << 20, 8 << 20, 16 << 20, 64 << 20, 256 << 20}

// stagedVariant is a set of copier options BenchmarkStagedVsPageable runs.
type stagedVariant struct {
	name string
	opt  Options
	// upTo is the largest size the variant runs at (0: every size).
	upTo int
}

// stagedVariants are the defaults and the tuning variations tried against
// them, each measured in the same run as the baselines. Tried on the
// 2-GPU H200 host on 2026-11-30 and dropped, since they did no better than
// the defaults within noise: ramps of 256 KiB or 512 KiB chunks at both
// ends of a transfer (frame 12.2–12.7 against 12.6–12.8 GB/s host to
// device; 64 MiB 33.6–35.8 against 36.2–38.2), and cutting small
// transfers into two chunks per lane of at least 64 KiB (3 MB: 15.6 against
// 18.0 GB/s). What did limit small transfers was the lanes' start
// (BenchmarkStagedTimeline): hence LaneSpin.
var stagedVariants = []stagedVariant{
	{"default", Options{}, 0},
	{"coop=off", Options{coopMax: -1}, 0},
	{"evict=off", Options{noEvict: true}, 0},
	{"stores=nt", Options{stores: storesStreaming}, 0},
	{"stores=cached", Options{stores: storesCached}, 0},
	{"piece=512KiB", Options{coopPiece: 512 << 10}, 16 << 20},
	{"piece=2MiB", Options{coopPiece: 2 << 20}, 16 << 20},
	{"spin=off", Options{LaneSpin: -1}, 0},
	{"issue=concurrent", Options{concurrentIssue: true}, 0},
	{"workers=16", Options{Workers: 16}, 0},
	{"workers=4", Options{Workers: 4}, 16 << 20},
	{"workers=12/window=48MiB", Options{Workers: 12, WindowBytes: 48 << 20}, 0},
}

// timelineVariants are the options BenchmarkStagedTimeline looks inside.
var timelineVariants = []stagedVariant{
	{"default", Options{}, 0},
	{"coop=off", Options{coopMax: -1}, 0},
	{"spin=off", Options{LaneSpin: -1}, 0},
	{"workers=1", Options{Workers: 1}, 0},
	{"workers=4", Options{Workers: 4}, 0},
}

// group is the number of transfers of each kind one iteration of
// BenchmarkStagedVsPageable makes back to back.
const group = 4

// BenchmarkStagedVsPageable times, in each iteration, the same transfer
// three ways, group times each, back to back, on the same memory: staged
// through the copier (DirectBelow off), the driver's own copy of the
// pageable slice (cuMemcpyHtoD/DtoH, the baseline the staged path must beat
// by 2× from 1 MiB on), and one asynchronous copy of a pool buffer (the
// pinned ceiling). Interleaving them makes the ratios immune to the host's
// drift over minutes. It reports each path's GB/s and the ratios
// x-pageable (staged over the driver's pageable copy) and of-pinned
// (staged over pinned); cold-GB/s is the first staged transfer of each
// group, which follows the baselines' copies (about a millisecond for a
// frame, longer than LaneSpin, so its lanes are asleep), and warm-GB/s the
// others (a stream of transfers).
func BenchmarkStagedVsPageable(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	ctx := context.Background()
	maxN := slices.Max(stagedSizes)
	dev := g.devMem(b, maxN)
	host := randomBytes(maxN, 11)
	pinned, err := g.pool.Get(ctx, maxN)
	if err != nil {
		b.Fatal(err)
	}
	defer pinned.Release()
	pc := g.copier(b, Options{})
	for _, v := range stagedVariants {
		opt := v.opt
		opt.DirectBelow, opt.Prewarm = -1, true
		c := g.copier(b, opt)
		for _, n := range stagedSizes {
			if v.upTo > 0 && n > v.upTo {
				continue
			}
			for _, d := range []Direction{HostToDevice, DeviceToHost} {
				b.Run(fmt.Sprintf("size=%s/%s/%v", sizeLabel(n), v.name, d), func(b *testing.B) {
					defer allCPUs()() // the testing package sets -test.cpu's GOMAXPROCS for each leaf
					var cold, warm, pageable, pin time.Duration
					timed := func(f func() error) time.Duration {
						t0 := time.Now()
						if err := f(); err != nil {
							b.Fatal(err)
						}
						return time.Since(t0)
					}
					staged := func() error {
						return c.run(ctx, op{d, dev.Ptr(), host[:n]}, false)
					}
					driver := func() error {
						if d == HostToDevice {
							return g.ctx.CopyHtoD(dev.Ptr(), host[:n])
						}
						return g.ctx.CopyDtoH(host[:n], dev.Ptr())
					}
					pinnedCopy := func() error {
						return pc.run(ctx, op{d, dev.Ptr(), pinned.Bytes()[:n]}, false)
					}
					b.SetBytes(int64(n) * group)
					for b.Loop() {
						cold += timed(staged)
						for range group - 1 {
							warm += timed(staged)
						}
						for range group {
							pageable += timed(driver)
						}
						for range group {
							pin += timed(pinnedCopy)
						}
					}
					gb := float64(n) * float64(b.N) / 1e9
					all := cold + warm
					b.ReportMetric(gb*group/all.Seconds(), "staged-GB/s")
					b.ReportMetric(gb/cold.Seconds(), "cold-GB/s")
					b.ReportMetric(gb*(group-1)/warm.Seconds(), "warm-GB/s")
					b.ReportMetric(gb*group/pageable.Seconds(), "pageable-GB/s")
					b.ReportMetric(gb*group/pin.Seconds(), "pinned-GB/s")
					b.ReportMetric(pageable.Seconds()/all.Seconds(), "x-pageable")
					b.ReportMetric(pin.Seconds()/all.Seconds(), "of-pinned")
				})
			}
		}
	}
}

// sizeLabel is sizeName, with sizes that are not whole KiB in bytes (the
// frame size).
func sizeLabel(n int) string {
	if n%1024 != 0 {
		return fmt.Sprintf("%dB", n)
	}
	return sizeName(n)
}

// BenchmarkStagedTimeline runs staged transfers one at a time with the
// copier's timeline on, and reports, as medians over the iterations in
// microseconds from the transfer's start, when each step of its chunks
// first and last happened: lane (lanes started), staged (slot and buffer
// held), copied (host to device: chunk in staging), issued (copy and event
// queued), synced (event completed) and done. It shows where the time of a
// small transfer goes: starting lanes, CPU copies, the driver's calls, or
// the DMA.
func BenchmarkStagedTimeline(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	ctx := context.Background()
	const maxN = 64 << 20
	dev := g.devMem(b, maxN)
	host := randomBytes(maxN, 12)
	for _, v := range timelineVariants {
		opt := v.opt
		opt.DirectBelow, opt.Prewarm, opt.timeline = -1, true, &timeline{}
		c := g.copier(b, opt)
		for _, n := range []int{1 << 20, frameBytes, 8 << 20, maxN} {
			if v.upTo > 0 && n > v.upTo {
				continue
			}
			for _, d := range []Direction{HostToDevice, DeviceToHost} {
				b.Run(fmt.Sprintf("size=%s/%s/%v", sizeLabel(n), v.name, d), func(b *testing.B) {
					defer allCPUs()() // the testing package sets -test.cpu's GOMAXPROCS for each leaf
					var firsts, lasts [numSteps][]time.Duration
					var totals []time.Duration
					b.SetBytes(int64(n))
					for b.Loop() {
						t0 := time.Now()
						if err := c.run(ctx, op{d, dev.Ptr(), host[:n]}, false); err != nil {
							b.Fatal(err)
						}
						totals = append(totals, time.Since(t0))
						first, last, seen := opt.timeline.snapshot()
						for s := range numSteps {
							if seen[s] {
								firsts[s] = append(firsts[s], first[s])
								lasts[s] = append(lasts[s], last[s])
							}
						}
					}
					med := func(x []time.Duration) float64 {
						slices.Sort(x)
						return float64(x[len(x)/2].Nanoseconds()) / 1e3
					}
					for s := range numSteps {
						if len(firsts[s]) > 0 {
							b.ReportMetric(med(firsts[s]), stepNames[s]+"-first-us")
							b.ReportMetric(med(lasts[s]), stepNames[s]+"-last-us")
						}
					}
					b.ReportMetric(med(totals), "total-us")
					b.ReportMetric(float64(opt.timeline.lanes()), "lanes")
					reportGBps(b, n)
				})
			}
		}
	}
}
