package transfer

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
)

// BenchmarkFileToDevice moves the file $PINPOOL_BENCH_FILE (on the GPU
// host: the 4 GiB safetensors file PyTorch wrote, scripts/gpu-run.sh, or any
// large file) to the device and back, in the same run:
//
//	warm/ratio/default: the file in the page cache, through ToDeviceFromFile
//	  and mapped (mmap, once) through ToDevice of the same copier, each
//	  iteration both ways (after one of each untimed); it reports both
//	  rates, file/mmap (the figure issue 31 wants at >= 0.95) and the
//	  processors each way kept busy (CPU time over wall time);
//	  warm/ratio/lanes-only the same with the file read by lanes borrowed
//	  but in its direction's window alone, own-lanes by the direction's own
//	  lanes alone (fileReaders, move);
//	warm/busy/...: the file (with and without borrowed lanes) and the
//	  mapping loaded while half as many goroutines as processors compute:
//	  the load's rate, and the share of the computation's rate alone that
//	  it keeps;
//	warm/pinpool, warm/mmap: each of the two alone; warm/pinpool-16lanes
//	  a copier of 16 lanes (the default is at most 8), warm/pinpool-4MiB
//	  one of 4 MiB pieces;
//	warm/readfile+driver: what a Go program does without pinpool
//	  (os.ReadFile, then the driver's copy of that pageable memory);
//	to-file/...: FromDeviceToFile into a new file (pinpool, and
//	  pinpool-1lane by a copier of one lane, which writes the pieces in
//	  order) beside a buffered write (one write(2) of the same bytes from
//	  Go memory) and an O_DIRECT write of them (4 MiB writes from aligned
//	  memory), each after the previous file's pages were written out.
//
// Every copier is made with Prewarm, so that no way's first transfer pays
// the pool's growth. BenchmarkFileCold reads the file from the disk.
//
//	PINPOOL_BENCH_FILE=/data/model.safetensors go test -run '^$' -bench FileToDevice -benchtime 3x ./transfer
func BenchmarkFileToDevice(b *testing.B) {
	g, f, n, d := benchFile(b)
	path := f.Name()
	c := g.copier(b, Options{Prewarm: true})
	ctx := context.Background()
	m, err := unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(m)
	load := func(c *Copier) func(*testing.B) {
		return func(b *testing.B) {
			if got, err := c.ToDeviceFromFile(ctx, d.Ptr(), f, 0, n); err != nil || got != n {
				b.Fatalf("%d bytes, %v", got, err)
			}
		}
	}
	mapped := func(c *Copier) func(*testing.B) {
		return func(b *testing.B) {
			if err := c.ToDevice(ctx, d.Ptr(), m); err != nil {
				b.Fatal(err)
			}
		}
	}
	fromFile, fromMap := load(c), mapped(c)
	warm := func(b *testing.B) { // the file into the page cache
		if _, err := io.CopyBuffer(io.Discard, io.NewSectionReader(f, 0, n), make([]byte, 4<<20)); err != nil {
			b.Fatal(err)
		}
	}
	// warm/ratio: the default copier's file load beside its load of the mapping; own-lanes: the file
	// read by the direction's own lanes alone (fileReaders).
	for _, v := range []struct {
		name          string
		lanes, window bool
	}{{"default", true, true}, {"lanes-only", true, false}, {"own-lanes", false, false}} {
		b.Run("warm/ratio/"+v.name, func(b *testing.B) {
			fileBorrow.lanes, fileBorrow.window = v.lanes, v.window
			defer func() { fileBorrow.lanes, fileBorrow.window = true, true }()
			warm(b)
			// Each way once before the clock (the copier's staging grown, its lanes started), then
			// both in every iteration, the first of them taking turns.
			ways := [2]func(*testing.B){fromFile, fromMap}
			ways[0](b)
			ways[1](b)
			var took, cpu [2]time.Duration
			b.SetBytes(2 * n)
			for i := 0; b.Loop(); i++ {
				for k := range 2 {
					w := (i + k) % 2
					t0, c0 := time.Now(), cpuTime(b)
					ways[w](b)
					took[w] += time.Since(t0)
					cpu[w] += cpuTime(b) - c0
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/took[0].Seconds()/1e9, "file-GB/s")
			b.ReportMetric(float64(n)*float64(b.N)/took[1].Seconds()/1e9, "mmap-GB/s")
			b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "file/mmap")
			b.ReportMetric(cpu[0].Seconds()/took[0].Seconds(), "file-cores")
			b.ReportMetric(cpu[1].Seconds()/took[1].Seconds(), "mmap-cores")
		})
	}
	for _, way := range []struct {
		name string
		run  func(*testing.B)
	}{
		{"pinpool", fromFile},
		{"mmap", fromMap},
		{"pinpool-16lanes", load(g.copier(b, Options{Lanes: 16, WindowBytes: 64 << 20, Prewarm: true}))},
		{"pinpool-4MiB", load(g.copier(b, Options{ChunkSize: 4 << 20, WindowBytes: 64 << 20, Prewarm: true}))},
		{"readfile+driver", func(b *testing.B) {
			data, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := g.ctx.CopyHtoD(d.Ptr(), data); err != nil {
				b.Fatal(err)
			}
		}},
	} {
		b.Run("warm/"+way.name, func(b *testing.B) {
			warm(b)
			b.SetBytes(n)
			for b.Loop() {
				way.run(b)
			}
		})
	}
	// warm/busy/...: the loads while GOMAXPROCS/2 goroutines of the caller compute; work/alone is
	// the share of their rate alone that they keep meanwhile (what the borrowed lanes take from them).
	for _, v := range []struct {
		name  string
		lanes bool
		load  func(*testing.B)
	}{{"file", true, fromFile}, {"file-own-lanes", false, fromFile}, {"mmap", true, fromMap}} {
		b.Run("warm/busy/"+v.name, func(b *testing.B) {
			fileBorrow.lanes = v.lanes
			defer func() { fileBorrow.lanes = true }()
			warm(b)
			v.load(b)
			var stop atomic.Bool
			var work atomic.Int64
			compute := func(d time.Duration, load func()) (float64, time.Duration) {
				stop.Store(false)
				work.Store(0)
				var wg sync.WaitGroup
				for range runtime.GOMAXPROCS(0) / 2 {
					wg.Go(func() {
						x := uint64(1)
						for !stop.Load() {
							for range 1 << 12 {
								x ^= x << 13
								x ^= x >> 7
								x ^= x << 17
							}
							work.Add(1)
						}
						busySink.Add(x)
					})
				}
				t0 := time.Now()
				load()
				time.Sleep(d)
				dt := time.Since(t0)
				stop.Store(true)
				wg.Wait()
				return float64(work.Load()) / dt.Seconds(), dt
			}
			alone, _ := compute(200*time.Millisecond, func() {})
			b.ResetTimer()
			rate, dt := compute(0, func() {
				for range b.N {
					v.load(b)
				}
			})
			b.ReportMetric(float64(n)*float64(b.N)/dt.Seconds()/1e9, "load-GB/s")
			b.ReportMetric(rate/alone, "work/alone")
		})
	}
	out := filepath.Join(filepath.Dir(path), "bench-out.bin")
	defer os.Remove(out)
	host := make([]byte, n) // the bytes written by the plain ways
	if err := g.ctx.CopyDtoH(host, d.Ptr()); err != nil {
		b.Fatal(err)
	}
	toFile := func(b *testing.B, flags int, write func(w *os.File)) {
		b.SetBytes(n)
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			os.Remove(out)
			unix.Sync() // the last file's dirty pages out of the way
			w, err := os.OpenFile(out, os.O_RDWR|os.O_CREATE|os.O_TRUNC|flags, 0o644)
			if err != nil {
				b.Skipf("cannot open %s with flags %#x: %v", out, flags, err)
			}
			b.StartTimer()
			write(w)
			b.StopTimer()
			w.Close()
			b.StartTimer()
		}
	}
	b.Run("to-file/pinpool", func(b *testing.B) {
		toFile(b, 0, func(w *os.File) {
			if got, err := c.FromDeviceToFile(ctx, w, 0, d.Ptr(), n); err != nil || got != n {
				b.Fatalf("%d bytes, %v", got, err)
			}
		})
	})
	c1 := g.copier(b, Options{Lanes: 1, Prewarm: true})
	b.Run("to-file/pinpool-1lane", func(b *testing.B) {
		toFile(b, 0, func(w *os.File) {
			if got, err := c1.FromDeviceToFile(ctx, w, 0, d.Ptr(), n); err != nil || got != n {
				b.Fatalf("%d bytes, %v", got, err)
			}
		})
	})
	b.Run("to-file/buffered-write", func(b *testing.B) {
		toFile(b, 0, func(w *os.File) {
			if _, err := w.Write(host); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("to-file/direct-write", func(b *testing.B) {
		al := g.pinnedMem(b, 4<<20) // page-aligned, as O_DIRECT wants
		toFile(b, unix.O_DIRECT, func(w *os.File) {
			for off := int64(0); off < n; off += int64(len(al)) {
				k := min(int64(len(al)), n-off)
				if k%directAlign != 0 {
					k = (k + directAlign - 1) &^ (directAlign - 1) // the tail, padded: the file ends a little longer
				}
				copy(al[:k], host[off:min(off+k, n)])
				if _, err := w.WriteAt(al[:k], off); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkFileCold reads $PINPOOL_BENCH_FILE to the device from a cold
// page cache (dropped before each iteration), the default way beside the
// others the file source could take, in the same run, so that the default
// shows it is the fastest: buffered reads (no O_DIRECT: pread through the
// page cache, which reads ahead), and O_DIRECT with fewer and more reads at
// once (each lane keeps one in flight; a variant's Lanes are its readers,
// with no lanes borrowed: fileReaders) and larger pieces (Options.ChunkSize),
// the default's cold rule with two or eight readers instead of coldReaders
// (cold-Nreaders), and all-readers, the default without its cold rule (every
// reader it would use for a cached file, as many pieces in flight as the
// windows hold). It reports the cores the load keeps busy.
//
//	PINPOOL_BENCH_FILE=/data/model.safetensors go test -run '^$' -bench FileCold -benchtime 1x -count 3 ./transfer
func BenchmarkFileCold(b *testing.B) {
	g, f, n, d := benchFile(b)
	defer func() { sourceWays.direct = true }()
	for _, v := range []struct {
		name         string
		buffered     bool
		chunk, lanes int
	}{
		{"default", false, 0, 0},
		{"cold-2readers", false, 0, 0},
		{"cold-8readers", false, 0, 0},
		{"all-readers", false, 0, -1},
		{"direct-2MiB-8lanes", false, 2 << 20, 8},
		{"buffered-2MiB-8lanes", true, 2 << 20, 8},
		{"buffered-8MiB-8lanes", true, 8 << 20, 8},
		{"direct-2MiB-2lanes", false, 2 << 20, 2},
		{"direct-2MiB-4lanes", false, 2 << 20, 4},
		{"direct-2MiB-16lanes", false, 2 << 20, 16},
		{"direct-4MiB-8lanes", false, 4 << 20, 8},
		{"direct-8MiB-8lanes", false, 8 << 20, 8},
	} {
		b.Run(v.name, func(b *testing.B) {
			sourceWays.direct = !v.buffered
			// A variant's lanes are its readers; all-readers is the default without the cold rule.
			// cold-Nreaders: the default with N readers for a cold range instead of coldReaders.
			fileBorrow.lanes, fileBorrow.cold = v.lanes <= 0, v.lanes == 0
			readers := coldReaders
			fmt.Sscanf(v.name, "cold-%dreaders", &coldReaders)
			defer func() { fileBorrow.lanes, fileBorrow.cold, coldReaders = true, true, readers }()
			opt := Options{ChunkSize: v.chunk, Lanes: max(v.lanes, 0), Prewarm: true}
			if v.chunk > 0 {
				opt.WindowBytes = int64(v.chunk * 2 * v.lanes)
			}
			c := g.copier(b, opt)
			b.SetBytes(n)
			var cpu, wall time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dropCache(b, f, 0, 0)
				b.StartTimer()
				cpu0, t0 := cpuTime(b), time.Now()
				if got, err := c.ToDeviceFromFile(context.Background(), d.Ptr(), f, 0, n); err != nil || got != n {
					b.Fatalf("%d bytes, %v", got, err)
				}
				cpu += cpuTime(b) - cpu0
				wall += time.Since(t0)
			}
			// The cores the load kept busy (the process's CPU time over the wall time).
			b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
		})
	}
}

// busySink keeps warm/busy's computation from being optimised away.
var busySink atomic.Uint64

// benchFile opens $PINPOOL_BENCH_FILE (closed at the benchmark's end) on a
// GPU with device memory of its size, or skips the benchmark.
func benchFile(b *testing.B) (*gpu, *os.File, int64, *cuda.DeviceMem) {
	b.Helper()
	path := os.Getenv("PINPOOL_BENCH_FILE")
	if path == "" {
		b.Skip("PINPOOL_BENCH_FILE not set: the file to measure (scripts/gpu-run.sh sets it on the GPU host)")
	}
	g := newGPU(b, cudahost.Options{})
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	fi, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	return g, f, fi.Size(), g.devMem(b, int(fi.Size()))
}
