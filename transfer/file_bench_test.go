package transfer

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
)

// BenchmarkFileToDevice moves the file $PINPOOL_BENCH_FILE (on the GPU
// host: the 4 GiB safetensors file PyTorch wrote, scripts/gpu-run.sh) to
// the device and back, beside what a Go program does without pinpool
// (os.ReadFile, then the driver's copy of that pageable memory; the
// driver's copy to Go memory, then os.WriteFile), in the same run:
//
//	warm: the file is in the page cache;
//	cold: the file was dropped from it (fsync, then POSIX_FADV_DONTNEED) before each iteration.
//
//	PINPOOL_BENCH_FILE=/data/model.safetensors go test -run '^$' -bench FileToDevice -benchtime 3x ./transfer
func BenchmarkFileToDevice(b *testing.B) {
	g, f, n, d := benchFile(b)
	path := f.Name()
	c := g.copier(b, Options{})
	drop := func() { dropCache(b, f) }
	warm := func() {
		if _, err := os.ReadFile(path); err != nil {
			b.Fatal(err)
		}
	}
	pinpool := func(b *testing.B) {
		if got, err := c.ToDeviceFromFile(context.Background(), d.Ptr(), f, 0, n); err != nil || got != n {
			b.Fatalf("%d bytes, %v", got, err)
		}
	}
	plain := func(b *testing.B) {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.ctx.CopyHtoD(d.Ptr(), data); err != nil {
			b.Fatal(err)
		}
	}
	for _, way := range []struct {
		name string
		run  func(*testing.B)
	}{{"pinpool", pinpool}, {"readfile+driver", plain}} {
		b.Run("warm/"+way.name, func(b *testing.B) {
			warm()
			b.SetBytes(n)
			for b.Loop() {
				way.run(b)
			}
		})
		b.Run("cold/"+way.name, func(b *testing.B) {
			b.SetBytes(n)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				drop()
				b.StartTimer()
				way.run(b)
			}
		})
	}
	out := filepath.Join(filepath.Dir(path), "bench-out.bin")
	defer os.Remove(out)
	b.Run("to-file/pinpool", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			w, err := os.Create(out)
			if err != nil {
				b.Fatal(err)
			}
			if got, err := c.FromDeviceToFile(context.Background(), w, 0, d.Ptr(), n); err != nil || got != n {
				b.Fatalf("%d bytes, %v", got, err)
			}
			w.Close()
		}
	})
	b.Run("to-file/driver+writefile", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			data := make([]byte, n)
			if err := g.ctx.CopyDtoH(data, d.Ptr()); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(out, data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFileCold reads $PINPOOL_BENCH_FILE to the device from a cold
// page cache, every way the file source can read it, with pieces of 2 to
// 16 MiB and 2 to 16 lanes: the measurements behind the default.
func BenchmarkFileCold(b *testing.B) {
	g, f, n, d := benchFile(b)
	defer func() { sourceWays.direct, sourceWays.firstWay = true, probeCachestat }()
	for _, v := range []struct {
		name         string
		direct       bool
		probe        int32
		chunk, lanes int
	}{
		{"default", true, probeCachestat, 0, 0},
		{"mincore", true, probeMincore, 0, 0},
		{"buffered", false, probeCachestat, 0, 0},
		{"direct/8MiB/4lanes", true, probeCachestat, 8 << 20, 4},
		{"direct/4MiB/4lanes", true, probeCachestat, 4 << 20, 4},
	} {
		b.Run(v.name, func(b *testing.B) {
			sourceWays.direct, sourceWays.firstWay = v.direct, v.probe
			opt := Options{ChunkSize: v.chunk, Lanes: v.lanes}
			if v.chunk > 0 {
				opt.WindowBytes = int64(v.chunk * 2 * max(v.lanes, 1))
			}
			c := g.copier(b, opt)
			b.SetBytes(n)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dropCache(b, f)
				b.StartTimer()
				if got, err := c.ToDeviceFromFile(context.Background(), d.Ptr(), f, 0, n); err != nil || got != n {
					b.Fatalf("%d bytes, %v", got, err)
				}
			}
		})
	}
}

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

// dropCache drops f from the page cache (synced first, so that its pages
// are clean), so that the next read comes from the disk.
func dropCache(b *testing.B, f *os.File) {
	b.Helper()
	f.Sync()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}
