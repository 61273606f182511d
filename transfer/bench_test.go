package transfer

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cudahost"
)

// Benchmarks of the GPU host (they skip without a GPU). Each reports MB/s
// (b.SetBytes) and GB/s. scripts/gpu-run.sh runs them with -test.cpu 1;
// the lanes of the staged path need more than one processor, so
// the benchmarks that stage raise GOMAXPROCS to the number of CPUs while
// they run.

// benchSizes are the sizes of the bandwidth table.
var benchSizes = []int{4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30}

func sizeName(n int) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// reportGBps reports the bandwidth of b.N operations of n bytes.
func reportGBps(b *testing.B, n int) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(n)*float64(b.N)/s/1e9, "GB/s")
	}
}

// allCPUs raises GOMAXPROCS to every CPU and returns the function that
// restores it. The testing package sets GOMAXPROCS to the -test.cpu value
// before it runs each sub-benchmark, so a benchmark whose sub-benchmarks need every CPU
// calls allCPUs in each of them, not only at its top: with -test.cpu 1 the
// staged path otherwise runs its lanes on one processor (observed on the
// H200 host: 6-10 GB/s instead of 43-49).
func allCPUs() func() {
	old := runtime.GOMAXPROCS(runtime.NumCPU())
	return func() { runtime.GOMAXPROCS(old) }
}

// BenchmarkTransfer is the table of every path, direction and size:
//
//   - pageable: the driver's synchronous copy of a Go slice
//     (cuda.Context.CopyHtoD/DtoH), the baseline the staged path must beat;
//   - auto: the copier with default options on a Go slice (direct below
//     DirectBelow, staged above);
//   - staged: the copier's staging pipeline on a Go slice (DirectBelow off);
//   - pinned: the copier on a pool buffer (one asynchronous copy);
//   - registered: the copier on a Go slice registered with Register;
//   - mapped: no copy, the GPU reads (H2D: the read-sum kernel) or writes
//     (D2H: the fill kernel) mapped host memory in place;
//   - bidir: pinned H2D and D2H of n bytes each at once, on the copier's two
//     streams (SetBytes counts both).
func BenchmarkTransfer(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	mg := newGPU(b, cudahost.Options{Mapped: true})
	ctx := context.Background()
	maxN := benchSizes[len(benchSizes)-1]
	dev := g.devMem(b, maxN)
	dev2 := g.devMem(b, maxN)
	pageable := randomBytes(maxN, 1)
	auto := g.copier(b, Options{})
	staged := g.copier(b, Options{DirectBelow: -1})
	pinned, pinned2 := g.pinnedMem(b, maxN), g.pinnedMem(b, maxN)
	regMem := randomBytes(maxN, 2)
	reg, err := auto.Register(regMem)
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	mapped, err := mg.pool.Get(ctx, maxN)
	if err != nil {
		b.Fatal(err)
	}
	defer mapped.Release()
	mptr, err := MappedPointer(mapped)
	if err != nil {
		b.Fatal(err)
	}
	copier := func(c *Copier, host []byte) func(Direction, int) error {
		return func(d Direction, n int) error {
			return c.transfer(ctx, op{d, dev.Ptr(), host[:n]}, false)
		}
	}
	paths := []struct {
		name string
		run  func(Direction, int) error
	}{
		{"pageable", func(d Direction, n int) error {
			if d == HostToDevice {
				return g.ctx.CopyHtoD(dev.Ptr(), pageable[:n])
			}
			return g.ctx.CopyDtoH(pageable[:n], dev.Ptr())
		}},
		{"auto", copier(auto, pageable)},
		{"staged", copier(staged, pageable)},
		{"pinned", copier(auto, pinned)},
		{"registered", copier(auto, regMem)},
		{"mapped", func(d Direction, n int) error {
			var err error
			if d == HostToDevice {
				err = mg.k.ReadSumAsync(mg.s, mptr, n)
			} else {
				err = mg.k.Fill(mg.s, mptr, n, 7)
			}
			if err != nil {
				return err
			}
			return mg.s.Synchronize()
		}},
	}
	for _, n := range benchSizes {
		for _, p := range paths {
			for _, d := range []Direction{HostToDevice, DeviceToHost} {
				b.Run(fmt.Sprintf("%s/%s/%v", sizeName(n), p.name, d), func(b *testing.B) {
					defer allCPUs()() // the testing package sets -test.cpu's GOMAXPROCS for each leaf
					b.SetBytes(int64(n))
					for b.Loop() {
						if err := p.run(d, n); err != nil {
							b.Fatal(err)
						}
					}
					reportGBps(b, n)
				})
			}
		}
		b.Run(fmt.Sprintf("%s/pinned/bidir", sizeName(n)), func(b *testing.B) {
			defer allCPUs()() // the testing package sets -test.cpu's GOMAXPROCS for each leaf
			b.SetBytes(2 * int64(n))
			for b.Loop() {
				up := auto.ToDeviceAsync(ctx, dev.Ptr(), pinned[:n])
				if err := auto.FromDevice(ctx, pinned2[:n], dev2.Ptr()); err != nil {
					b.Fatal(err)
				}
				if err := up.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			reportGBps(b, 2*n)
		})
	}
	b.Logf("auto copier stats: %+v", auto.Stats())
}

// BenchmarkCrossover compares, for sizes around the default DirectBelow,
// the direct synchronous copy of a Go slice with the staged path: the
// smallest size from which staged is faster is the DirectBelow to set for
// the machine.
func BenchmarkCrossover(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	ctx := context.Background()
	const maxN = 8 << 20
	dev := g.devMem(b, maxN)
	host := randomBytes(maxN, 3)
	staged := g.copier(b, Options{DirectBelow: -1, Prewarm: true})
	direct := g.copier(b, Options{DirectBelow: 1 << 62})
	for n := 16 << 10; n <= maxN; n *= 2 {
		for _, c := range []struct {
			name string
			c    *Copier
		}{{"direct", direct}, {"staged", staged}} {
			for _, d := range []Direction{HostToDevice, DeviceToHost} {
				b.Run(fmt.Sprintf("%s/%s/%v", sizeName(n), c.name, d), func(b *testing.B) {
					defer allCPUs()() // the testing package sets -test.cpu's GOMAXPROCS for each leaf
					b.SetBytes(int64(n))
					for b.Loop() {
						if err := c.c.transfer(ctx, op{d, dev.Ptr(), host[:n]}, false); err != nil {
							b.Fatal(err)
						}
					}
					reportGBps(b, n)
				})
			}
		}
	}
}

// BenchmarkPinnedLatency is a 4 KiB pinned copy through the copier and
// through the bare stream (cuMemcpyHtoDAsync + cuStreamSynchronize, as the C
// reference scripts/ref/memcpy_bw.cu times it): the difference is the
// copier's overhead (an event record and query instead of a stream sync).
func BenchmarkPinnedLatency(b *testing.B) {
	g := newGPU(b, cudahost.Options{})
	ctx := context.Background()
	dev := g.devMem(b, 4096)
	buf, err := g.pool.Get(ctx, 4096)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Release()
	c := g.copier(b, Options{})
	b.Run("copier", func(b *testing.B) {
		lat := make([]time.Duration, 0, 1<<16)
		for b.Loop() {
			t0 := time.Now()
			if err := c.ToDeviceBuffer(ctx, dev.Ptr(), buf); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportMedian(b, lat)
	})
	b.Run("stream", func(b *testing.B) {
		lat := make([]time.Duration, 0, 1<<16)
		for b.Loop() {
			t0 := time.Now()
			if err := g.s.CopyHtoDAsync(dev.Ptr(), buf.Bytes()); err != nil {
				b.Fatal(err)
			}
			if err := g.s.Synchronize(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportMedian(b, lat)
	})
}

// reportMedian reports the median of the iterations' times as p50-ns, the
// statistic scripts/ref/memcpy_bw.cu prints for its latency (ns/op is the
// mean, which a few slow iterations pull up).
func reportMedian(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
}

// BenchmarkStagedTuning sweeps the staged path's lanes, chunk size and
// window on 64 MiB and 256 MiB, to find what limits it. Small windows
// keep the staging buffers in the last-level cache.
func BenchmarkStagedTuning(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	ctx := context.Background()
	const maxN = 256 << 20
	dev := g.devMem(b, maxN)
	host := randomBytes(maxN, 4)
	for _, tc := range []struct {
		lanes, chunk, window int
	}{
		{8, 2 << 20, 32 << 20}, // the defaults
		{16, 2 << 20, 32 << 20},
		{12, 2 << 20, 48 << 20},
	} {
		c := g.copier(b, Options{DirectBelow: -1, Lanes: tc.lanes, ChunkSize: tc.chunk, WindowBytes: int64(tc.window)})
		for _, n := range []int{64 << 20, maxN} {
			for _, d := range []Direction{HostToDevice, DeviceToHost} {
				b.Run(fmt.Sprintf("size=%s/lanes=%d/chunk=%s/window=%s/%v", sizeName(n), tc.lanes, sizeName(tc.chunk), sizeName(tc.window), d), func(b *testing.B) {
					defer allCPUs()() // the testing package sets -test.cpu's GOMAXPROCS for each leaf
					b.SetBytes(int64(n))
					for b.Loop() {
						if err := c.transfer(ctx, op{d, dev.Ptr(), host[:n]}, false); err != nil {
							b.Fatal(err)
						}
					}
					reportGBps(b, n)
				})
			}
		}
	}
}
