//go:build linux

package transfer

// Benchmarks of the transfer engine's shape: staged GB/s over sizes, a
// stream of frames from 1 and 10 goroutines, and a paced stream of frames
// with the process's CPU time per frame, each beside the driver's own copy
// of the same pageable memory in the same run. They use only the package's
// public options, so that the same file measures an older engine too;
// shapeCopiers, defined beside the engine, names the copiers to compare.

import (
	"context"
	"flag"
	"fmt"
	"slices"
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
// frame: the driver's copy of pageable memory when copier is nil, else the
// copier it makes (frameWays, defined beside the engine, lists them).
type frameWay struct {
	name       string
	copier     func(tb testing.TB, g *gpu) *Copier
	streamOnly bool // not in BenchmarkPacedFrames
}

// frameMover returns the function that moves a frame the way w, in the
// direction it is given; one copier serves both directions.
func frameMover(b *testing.B, g *gpu, w frameWay) func(d Direction, host []byte, dev cuda.DevicePtr) error {
	ctx := context.Background()
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

// BenchmarkPacedFrames moves one stream of 1080p frames at a steady rate
// (30 and 300 frames a second; 4 frames used in turn, each copied to the
// same device memory) for a fixed time per iteration (-transfer.pacedfor), each way
// of frameWays: uploads only ("H2D"), downloads only into another host
// buffer ("D2H"), and each frame up then back, as a filter that returns
// the frame it was given ("round-trip"; one copier both ways). It reports per frame the process's
// CPU time (cpu-ns/frame, getrusage: every thread, the driver's among
// them; of it the time in the kernel, sys-ns/frame) and the copies' wall
// time (wall-ns/frame; a round trip counts both), the CPU time as a share
// of one core (cpu-share) and per GB moved (cpu-ms/GB), and the CPU time
// the process burns at rest just before, as a share of a core
// (idle-cpu-share). Run it with -test.benchtime 1x.
func BenchmarkPacedFrames(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	const frames = 4
	dev := g.devMem(b, frameBytes)
	host := randomBytes(frames*frameBytes, 40)
	back := make([]byte, frames*frameBytes)
	for _, w := range frameWays {
		if w.streamOnly {
			continue
		}
		move := frameMover(b, g, w)
		for _, rate := range []int{30, 300} {
			for _, trip := range []string{"H2D", "D2H", "round-trip"} {
				// frame moves frame i of the stream.
				frame := func(i int) error {
					lo, hi := (i%frames)*frameBytes, (i%frames+1)*frameBytes
					if trip != "D2H" {
						if err := move(HostToDevice, host[lo:hi], dev.Ptr()); err != nil || trip == "H2D" {
							return err
						}
					}
					return move(DeviceToHost, back[lo:hi], dev.Ptr())
				}
				perFrame := frameBytes
				if trip == "round-trip" {
					perFrame *= 2
				}
				b.Run(fmt.Sprintf("%s/fps=%d/%s", w.name, rate, trip), func(b *testing.B) {
					defer allCPUs()()
					period := time.Second / time.Duration(rate)
					count := int(*pacedFor / period)
					var wall, cpu, sys, el, idle, idleEl time.Duration
					total := 0
					for b.Loop() {
						// One frame first, so that a copier's lanes and
						// staging exist before the clock starts.
						if err := frame(0); err != nil {
							b.Fatal(err)
						}
						// The process's CPU time at rest, for comparison:
						// what its threads burn with nothing to do (a
						// driver's helper threads, left busy by an earlier
						// way).
						idle0, i0 := cpuTime(b), time.Now()
						time.Sleep(max(period, 200*time.Millisecond))
						idle += cpuTime(b) - idle0
						idleEl += time.Since(i0)
						u0, s0 := cpuTimes(b)
						cpu0, t0 := u0+s0, time.Now()
						for i := range count {
							if d := time.Until(t0.Add(time.Duration(i) * period)); d > 0 {
								time.Sleep(d)
							}
							s := time.Now()
							if err := frame(i); err != nil {
								b.Fatal(err)
							}
							wall += time.Since(s)
						}
						el += time.Since(t0)
						u1, s1 := cpuTimes(b)
						cpu += u1 + s1 - cpu0
						sys += s1 - s0
						total += count
					}
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(total), "cpu-ns/frame")
					b.ReportMetric(float64(sys.Nanoseconds())/float64(total), "sys-ns/frame")
					b.ReportMetric(float64(wall.Nanoseconds())/float64(total), "wall-ns/frame")
					b.ReportMetric(cpu.Seconds()/el.Seconds(), "cpu-share")
					b.ReportMetric(cpu.Seconds()*1e3/(float64(total)*float64(perFrame)/1e9), "cpu-ms/GB")
					b.ReportMetric(idle.Seconds()/idleEl.Seconds(), "idle-cpu-share")
				})
			}
		}
	}
}

// pacedFor is how long BenchmarkPacedFrames streams at each rate: shorter
// runs fit more ways into one call on the GPU host.
var pacedFor = flag.Duration("transfer.pacedfor", 5*time.Second, "how long BenchmarkPacedFrames streams at each rate")
