//go:build linux

package transfer

// Benchmarks of the transfer engine's shape: staged GB/s over sizes, a
// stream of frames from 1 and 10 goroutines, and a paced stream of frames
// with the process's CPU time per frame, each beside the driver's own copy
// of the same pageable memory in the same run. They use only the package's
// public options, so that the same file measures an older engine too;
// shapeCopiers, defined beside the engine, names the copiers to compare.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"regexp"
	rtrace "runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
)

// shapeSizes are the sizes of BenchmarkStagedSizes.
var shapeSizes = []int{1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20, 256 << 20, 1 << 30}

// cpuTime is the CPU time the process has used, all threads, user and
// system (getrusage).
func cpuTime(tb testing.TB) time.Duration {
	user, sys := cpuTimes(tb)
	return user + sys
}

// cpuTimes is cpuTime in user and system time.
func cpuTimes(tb testing.TB) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// BenchmarkStagedSizes times, in each iteration, four staged transfers of
// each copier of shapeCopiers back to back, then four of the driver's own
// copy of the same pageable memory, at every size of shapeSizes, both
// directions. It reports staged-GB/s (all four), cold-GB/s (the first of
// the four, whose lanes slept through the driver's copies) and warm-GB/s
// (the other three), pageable-GB/s, x-pageable (staged over pageable), and
// the process's CPU time per GB moved by each (staged-cpu-ms/GB, which
// includes the lanes' spin after the four, and pageable-cpu-ms/GB): the
// staged transfers are followed by a pause longer than any spin, outside
// the timings, before the driver's copies start.
func BenchmarkStagedSizes(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	ctx := context.Background()
	maxN := slices.Max(shapeSizes)
	dev := g.devMem(b, maxN)
	host := randomBytes(maxN, 21)
	const group = 4
	for _, nc := range shapeCopiers(b, g) {
		for _, n := range shapeSizes {
			if nc.upTo > 0 && n > nc.upTo {
				continue
			}
			for _, d := range []Direction{HostToDevice, DeviceToHost} {
				if !nc.bothWays && d != nc.only {
					continue
				}
				b.Run(fmt.Sprintf("%s/size=%s/%v", nc.name, sizeName(n), d), func(b *testing.B) {
					defer allCPUs()()
					timed := func(f func() error) time.Duration {
						t0 := time.Now()
						if err := f(); err != nil {
							b.Fatal(err)
						}
						return time.Since(t0)
					}
					staged := func() error {
						if d == HostToDevice {
							return nc.c.ToDevice(ctx, dev.Ptr(), host[:n])
						}
						return nc.c.FromDevice(ctx, host[:n], dev.Ptr())
					}
					driver := func() error {
						if d == HostToDevice {
							return g.ctx.CopyHtoD(dev.Ptr(), host[:n])
						}
						return g.ctx.CopyDtoH(host[:n], dev.Ptr())
					}
					var cold, warm, pageable, stagedCPU, pageableCPU time.Duration
					for b.Loop() {
						cpu0 := cpuTime(b)
						cold += timed(staged)
						for range group - 1 {
							warm += timed(staged)
						}
						time.Sleep(2 * time.Millisecond) // the lanes' spin ends
						cpu1 := cpuTime(b)
						stagedCPU += cpu1 - cpu0
						for range group {
							pageable += timed(driver)
						}
						pageableCPU += cpuTime(b) - cpu1
					}
					gb := float64(n) * float64(b.N) / 1e9
					b.ReportMetric(group*gb/(cold+warm).Seconds(), "staged-GB/s")
					b.ReportMetric(gb/cold.Seconds(), "cold-GB/s")
					b.ReportMetric((group-1)*gb/warm.Seconds(), "warm-GB/s")
					b.ReportMetric(group*gb/pageable.Seconds(), "pageable-GB/s")
					b.ReportMetric(pageable.Seconds()/(cold+warm).Seconds(), "x-pageable")
					b.ReportMetric(stagedCPU.Seconds()*1e3/(group*gb), "staged-cpu-ms/GB")
					b.ReportMetric(pageableCPU.Seconds()*1e3/(group*gb), "pageable-cpu-ms/GB")
				})
			}
		}
	}
}

// frameWay is a way BenchmarkFrameStream and BenchmarkPacedFrames move a
// frame: the copier it makes, or a reference's mover (goRefWays), or, when
// both are nil, the driver's copy of pageable memory (frameWays and
// pacedWays, defined beside the engine, list them).
type frameWay struct {
	name   string
	copier func(tb testing.TB, g *gpu) *Copier
	mover  func(tb testing.TB, g *gpu) func(d Direction, host []byte, dev cuda.DevicePtr) error
}

// isDriver reports whether w is the driver's copy.
func (w frameWay) isDriver() bool { return w.copier == nil && w.mover == nil }

// frameMover returns the function that moves a frame the way w, in the
// direction it is given; one copier serves both directions.
func frameMover(b *testing.B, g *gpu, w frameWay) func(d Direction, host []byte, dev cuda.DevicePtr) error {
	ctx := context.Background()
	if w.mover != nil {
		return w.mover(b, g)
	}
	if w.copier == nil {
		return func(d Direction, host []byte, dev cuda.DevicePtr) error {
			if d == HostToDevice {
				return g.ctx.CopyHtoD(dev, host)
			}
			return g.ctx.CopyDtoH(host, dev)
		}
	}
	c := w.copier(b, g)
	return func(d Direction, host []byte, dev cuda.DevicePtr) error {
		if d == HostToDevice {
			return c.ToDevice(ctx, dev, host)
		}
		return c.FromDevice(ctx, host, dev)
	}
}

// BenchmarkFrameStream moves 1080p frames (frameBytes) back to back from 1
// and from 10 goroutines at once, each with its own frames (4, used in
// turn) and device memory, each way of frameWays (one copier shared by the
// goroutines). It reports GB/s and frames/s over all goroutines, the wall
// time of one frame's copy (wall-ns/frame) and the process's CPU time per
// frame (cpu-ns/frame).
func BenchmarkFrameStream(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	const goroutinesMax, frames = 10, 4
	dev := g.devMem(b, goroutinesMax*frameBytes)
	host := make([][]byte, goroutinesMax)
	for i := range host {
		host[i] = randomBytes(frames*frameBytes, uint64(30+i))
	}
	for _, w := range frameWays {
		move := frameMover(b, g, w)
		for _, d := range []Direction{HostToDevice, DeviceToHost} {
			for _, gs := range []int{1, 10} {
				b.Run(fmt.Sprintf("%s/goroutines=%d/%v", w.name, gs, d), func(b *testing.B) {
					defer allCPUs()()
					var next atomic.Int64
					var busy atomic.Int64
					var wg sync.WaitGroup
					b.SetBytes(frameBytes)
					b.ResetTimer()
					cpu0, t0 := cpuTime(b), time.Now()
					for k := range gs {
						wg.Go(func() {
							for i := 0; ; i++ {
								if next.Add(1) > int64(b.N) {
									return
								}
								f := host[k][(i%frames)*frameBytes : (i%frames+1)*frameBytes]
								s := time.Now()
								if err := move(d, f, dev.Ptr()+cuda.DevicePtr(k*frameBytes)); err != nil {
									b.Error(err)
									return
								}
								busy.Add(int64(time.Since(s)))
							}
						})
					}
					wg.Wait()
					el, cpu := time.Since(t0), cpuTime(b)-cpu0
					b.StopTimer()
					b.ReportMetric(float64(frameBytes)*float64(b.N)/el.Seconds()/1e9, "GB/s")
					b.ReportMetric(float64(b.N)/el.Seconds(), "frames/s")
					b.ReportMetric(float64(busy.Load())/float64(b.N), "wall-ns/frame")
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/frame")
				})
			}
		}
	}
}

// BenchmarkPacedFrames moves one stream of 1080p frames at a steady rate (30 and 300 frames a
// second), each way of pacedWays in turn, frame by frame, as scripts/ref/paced.cpp does: the ways
// take turns in a new random order each round (a fixed seed per leaf), each frame at its own
// deadline one period after the frame before it, whichever way moved that one, so that every way is
// measured in the same minutes and each frame finds the stream's previous frame a period ago. One
// leaf per rate and trip: uploads of 4 frames used in turn ("H2D"), downloads into 4 other host
// buffers ("D2H"), and each frame up then back, as a filter that returns the frame it was given
// ("round-trip"; one copier both ways). Every way moves -transfer.pacedfor worth of frames at each
// rate in each leaf (at least one).
//
// A frame's CPU time is the process's (getrusage RUSAGE_SELF, user and system, every thread: the
// driver's, the lanes' and their spin among them) from half a period before its deadline to half a
// period after; its wall time is its copy's (a round trip counts both). Per way, named by its
// pacedWays entry without the "copier=" (driver, default, cold-2, ...), it reports the mean wall
// time per frame (<way>-wall-ns/frame) with its median and 99th percentile (<way>-p50-ns/frame,
// <way>-p99-ns/frame), the CPU time per frame and of it the kernel's (<way>-cpu-ns/frame,
// <way>-sys-ns/frame), and for each copier its ratios to the driver in the same leaf:
// <way>-x-speed, the driver's mean wall time over the way's, and <way>-x-cpu, the way's CPU time
// per frame over the driver's (issue 31's goal 5 asks x-speed >= 1.5 at x-cpu <= 1.25 of the
// default). It also reports the process's CPU time at rest just before the stream, as a share of a
// core (idle-cpu-share). Each way's copy is checked byte for byte before and after the stream, and
// the frames that the last round left in the host buffers after it. Run it with -test.benchtime
// 1x; -transfer.pacedways picks ways.
func BenchmarkPacedFrames(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	ways, err := pickPacedWays(*pacedWaysFlag)
	if err != nil {
		b.Fatal(err)
	}
	const frames = 4
	dev := g.devMem(b, frameBytes)
	host := randomBytes(frames*frameBytes, 40)
	back := make([]byte, frames*frameBytes)
	scratch := make([]byte, frameBytes)
	moves := make([]func(Direction, []byte, cuda.DevicePtr) error, len(ways))
	for k, w := range ways {
		moves[k] = frameMover(b, g, w)
	}
	trips := []string{"H2D", "D2H", "round-trip"}
	for _, rate := range []int{30, 300} {
		for ti, trip := range trips {
			b.Run(fmt.Sprintf("fps=%d/%s", rate, trip), func(b *testing.B) {
				defer allCPUs()()
				// frame moves slot i of the stream the way k.
				frame := func(k, i int) error {
					// A region per frame, named by its way, for a run with -test.trace.
					defer rtrace.StartRegion(context.Background(), ways[k].name).End()
					lo, hi := (i%frames)*frameBytes, (i%frames+1)*frameBytes
					if trip != "D2H" {
						if err := moves[k](HostToDevice, host[lo:hi], dev.Ptr()); err != nil || trip == "H2D" {
							return err
						}
					}
					return moves[k](DeviceToHost, back[lo:hi], dev.Ptr())
				}
				// check moves two frames each way with each way and compares the bytes; it
				// also makes the copiers' lanes and staging before the stream starts.
				check := func(when string) {
					for k, w := range ways {
						for f := range 2 {
							src := host[f*frameBytes : (f+1)*frameBytes]
							if trip != "D2H" {
								if err := g.ctx.MemsetD8(dev.Ptr(), 0, frameBytes); err != nil {
									b.Fatal(err)
								}
								if err := g.ctx.Synchronize(); err != nil {
									b.Fatal(err)
								}
								if err := moves[k](HostToDevice, src, dev.Ptr()); err != nil {
									b.Fatal(err)
								}
								g.checkDevice(b, fmt.Sprintf("%s %s upload, %s", w.name, trip, when), dev.Ptr(), src)
							}
							if trip != "H2D" {
								if err := g.ctx.CopyHtoD(dev.Ptr(), src); err != nil {
									b.Fatal(err)
								}
								clear(scratch)
								if err := moves[k](DeviceToHost, scratch, dev.Ptr()); err != nil {
									b.Fatal(err)
								}
								if !bytes.Equal(scratch, src) {
									b.Fatalf("%s %s download, %s: the bytes differ from the device's", w.name, trip, when)
								}
							}
						}
					}
				}
				period := time.Second / time.Duration(rate)
				perWay := max(1, int(*pacedFor/period))
				st := make([]pacedStats, len(ways))
				var idle, idleEl time.Duration
				rng := rand.New(rand.NewPCG(uint64(rate), uint64(ti)))
				for b.Loop() {
					check("before the stream")
					if trip == "D2H" { // every download reads frame 0
						if err := g.ctx.CopyHtoD(dev.Ptr(), host[:frameBytes]); err != nil {
							b.Fatal(err)
						}
					}
					clear(back)
					// The process's CPU time at rest, for comparison: what its threads burn
					// with nothing to do (a driver's helper threads, the runtime's).
					idle0, i0 := cpuTime(b), time.Now()
					time.Sleep(max(period, 300*time.Millisecond))
					idle += cpuTime(b) - idle0
					idleEl += time.Since(i0)

					order := pacedOrder(rng, len(ways), perWay)
					err := pacedRun(time.Now().Add(20*time.Millisecond), period, order, frame, func() (user, sys time.Duration) {
						return cpuTimes(b)
					}, st)
					if err != nil {
						b.Fatal(err)
					}
					// The last round's frames, still on the device (uploads) and in the host
					// buffers (downloads), then every way again.
					last := len(order) - 1
					if trip != "D2H" {
						f := last % frames
						g.checkDevice(b, fmt.Sprintf("%s, frame %d (%s)", trip, last, ways[order[last]].name), dev.Ptr(), host[f*frameBytes:(f+1)*frameBytes])
					}
					for f := range min(frames, len(order)) {
						want := host[:frameBytes]
						if trip == "round-trip" {
							want = host[f*frameBytes : (f+1)*frameBytes]
						}
						if trip != "H2D" && !bytes.Equal(back[f*frameBytes:(f+1)*frameBytes], want) {
							i := last - (last-f)%frames
							b.Fatalf("%s, frame %d (%s): the bytes differ from the source's", trip, i, ways[order[i]].name)
						}
					}
					check("after the stream")
				}
				driver := st[0].summary()
				for k, w := range ways {
					name := strings.TrimPrefix(w.name, "copier=")
					s := st[k].summary()
					b.ReportMetric(s.mean, name+"-wall-ns/frame")
					b.ReportMetric(s.p50, name+"-p50-ns/frame")
					b.ReportMetric(s.p99, name+"-p99-ns/frame")
					b.ReportMetric(s.cpu, name+"-cpu-ns/frame")
					b.ReportMetric(s.sys, name+"-sys-ns/frame")
					if k > 0 {
						b.ReportMetric(driver.mean/s.mean, name+"-x-speed")
						b.ReportMetric(s.cpu/driver.cpu, name+"-x-cpu")
					}
				}
				b.ReportMetric(idle.Seconds()/idleEl.Seconds(), "idle-cpu-share")
			})
		}
	}
}

// pacedOrder is the turns of BenchmarkPacedFrames's ways 0 to ways-1: rounds rounds, each every way
// once in a random order.
func pacedOrder(rng *rand.Rand, ways, rounds int) []int {
	order := make([]int, 0, ways*rounds)
	for range rounds {
		round := make([]int, ways)
		for k := range round {
			round[k] = k
		}
		rng.Shuffle(ways, func(i, j int) { round[i], round[j] = round[j], round[i] })
		order = append(order, round...)
	}
	return order
}

// pacedRun is BenchmarkPacedFrames's stream: slot i of order, from 0, is a frame that frame(order[i],
// i) moves at its deadline t0 + i*period; the CPU time that cpu reads from half a period before that
// deadline to half a period after (or until the frame is done, if later), and the frame's wall time,
// go to st[order[i]], as scripts/ref/paced.cpp counts them.
func pacedRun(t0 time.Time, period time.Duration, order []int, frame func(way, i int) error,
	cpu func() (user, sys time.Duration), st []pacedStats) error {
	var prev, prevSys time.Duration
	for i := 0; i <= len(order); i++ {
		d := t0.Add(time.Duration(i) * period)
		sleepUntil(d.Add(-period / 2))
		u, s := cpu()
		if i > 0 {
			w := &st[order[i-1]]
			w.cpu += u + s - prev
			w.sys += s - prevSys
		}
		prev, prevSys = u+s, s
		if i == len(order) {
			return nil
		}
		sleepUntil(d)
		s0 := time.Now()
		if err := frame(order[i], i); err != nil {
			return err
		}
		st[order[i]].wall = append(st[order[i]].wall, time.Since(s0))
	}
	return nil
}

// sleepUntil sleeps until t, if t is still to come.
func sleepUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

// pacedStats is what BenchmarkPacedFrames counts of one way: each frame's wall time, and the CPU
// time of the windows of its frames.
type pacedStats struct {
	wall     []time.Duration
	cpu, sys time.Duration
}

// pacedSummary is a way's figures per frame, in nanoseconds.
type pacedSummary struct{ mean, p50, p99, cpu, sys float64 }

// summary is s per frame: mean, median and 99th percentile of the wall time, and the mean CPU and
// system time.
func (s pacedStats) summary() pacedSummary {
	n := len(s.wall)
	if n == 0 {
		return pacedSummary{}
	}
	w := slices.Clone(s.wall)
	slices.Sort(w)
	var sum time.Duration
	for _, x := range w {
		sum += x
	}
	at := func(p float64) float64 { return float64(w[min(n-1, int(p*float64(n-1)+0.5))]) }
	return pacedSummary{
		mean: float64(sum) / float64(n), p50: at(0.5), p99: at(0.99),
		cpu: float64(s.cpu) / float64(n), sys: float64(s.sys) / float64(n),
	}
}

// pickPacedWays is pacedWays, the driver's first, less the copiers whose names do not match the
// regular expression expr (all of them when expr is empty).
func pickPacedWays(expr string) ([]frameWay, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("-transfer.pacedways: %w", err)
	}
	var ways []frameWay
	for _, w := range pacedWays {
		if w.isDriver() {
			ways = append([]frameWay{w}, ways...)
		} else if re.MatchString(w.name) {
			ways = append(ways, w)
		}
	}
	if len(ways) == 0 || !ways[0].isDriver() {
		return nil, fmt.Errorf("pacedWays has no driver's way")
	}
	return ways, nil
}

// pacedFor is how long each way of BenchmarkPacedFrames streams at each rate, in each leaf: the
// ways take turns, so a leaf lasts about that times the number of ways.
var pacedFor = flag.Duration("transfer.pacedfor", 2*time.Second, "how long each way of BenchmarkPacedFrames streams at each rate, in each leaf")

// pacedWaysFlag picks the copiers of BenchmarkPacedFrames; the driver's copy is always in.
var pacedWaysFlag = flag.String("transfer.pacedways", "", "regular expression: the copiers of BenchmarkPacedFrames (the driver's copy is always in)")
