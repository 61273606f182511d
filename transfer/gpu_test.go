package transfer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/internal/testkernels"
)

// GPU tests: they skip on a machine without a CUDA driver or device, and
// run for real on the GPU host through scripts/gpu-run.sh.

// gpu is a pool of pinned memory on device 0, with kernels and a stream
// for checking data on the device.
type gpu struct {
	be   *cudahost.Backend
	ctx  *cuda.Context
	pool *pinpool.Pool
	k    *testkernels.Kernels
	s    *cuda.Stream
}

// newGPU returns a pool over a CUDA backend with bopt, or skips the test
// without a GPU (or when the device cannot do what bopt asks).
func newGPU(tb testing.TB, bopt cudahost.Options) *gpu {
	tb.Helper()
	applySpinFlags()
	be, err := cudahost.New(bopt)
	switch {
	case cuda.IsNoDriver(err):
		tb.Skipf("GPU test skipped: no CUDA driver or device on this machine (%v); run scripts/gpu-run.sh on the GPU host", err)
	case errors.Is(err, cudahost.ErrUnsupported), errors.Is(err, cudahost.ErrCannotMap):
		tb.Skipf("GPU test skipped: the device cannot do %+v: %v", bopt, err)
	case err != nil:
		tb.Fatal(err)
	}
	g := &gpu{be: be, ctx: be.Context()}
	if g.pool, err = pinpool.New(pinpool.Options{Backend: pinpool.CUDABackend(be)}); err != nil {
		be.Close()
		tb.Fatal(err)
	}
	if g.k, err = testkernels.Load(g.ctx); err != nil {
		tb.Fatal(err)
	}
	if g.s, err = g.ctx.NewStream(cuda.StreamNonBlocking); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		g.s.Destroy()
		g.k.Close()
		var st pinpool.Stats
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if st = g.pool.Stats(); st.BytesInUse == 0 && st.BytesPending == 0 {
				break
			}
		}
		if st.BytesInUse != 0 || st.BytesPending != 0 {
			tb.Errorf("pool not consistent: %d bytes in use, %d pending", st.BytesInUse, st.BytesPending)
		}
		g.pool.Close()
		be.Close()
	})
	return g
}

// copier is a copier over g's context with options opt, closed when the test ends.
func (g *gpu) copier(tb testing.TB, opt Options) *Copier {
	tb.Helper()
	return g.copierOn(tb, cudaDevice{g.ctx}, opt, defaultTuning())
}

// copierOn is a copier over dev (g's context, or a device that wraps it) with options opt and
// tuning tu, closed when the test ends: every GPU test and benchmark makes its copiers here.
func (g *gpu) copierOn(tb testing.TB, dev device, opt Options, tu tuning) *Copier {
	tb.Helper()
	// Lanes defaults from GOMAXPROCS, which the testing package leaves at -test.cpu after each leaf.
	defer allCPUs()()
	c, err := newCopier(g.pool, dev, opt, tu)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil && !errors.Is(err, ErrClosed) {
			tb.Errorf("Close: %v", err)
		}
	})
	return c
}

func (g *gpu) devMem(tb testing.TB, n int) *cuda.DeviceMem {
	tb.Helper()
	d, err := g.ctx.MemAlloc(n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Free() })
	return d
}

// pinnedMem returns n bytes of a pool buffer (page-locked for the device),
// released when tb ends.
func (g *gpu) pinnedMem(tb testing.TB, n int) []byte {
	tb.Helper()
	buf, err := g.pool.Get(context.Background(), n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { buf.Release() })
	return buf.Bytes()[:n]
}

// checkDevice compares the device bytes at p with want, by the checksum
// kernel.
func (g *gpu) checkDevice(tb testing.TB, what string, p cuda.DevicePtr, want []byte) {
	tb.Helper()
	got, err := g.k.Checksum(g.s, p, len(want))
	if err != nil {
		tb.Fatal(err)
	}
	if got != testkernels.Checksum(want) {
		tb.Fatalf("%s: device checksum %#x, want %#x", what, got, testkernels.Checksum(want))
	}
}

// gpuPaths are the ways the round-trip test gets each path: options for
// the copier, and how the host memory is made.
var gpuPaths = []Path{PathDirect, PathStaged, PathPinned, PathRegistered}

// TestGPUCopierLanes checks that the benchmarks' copiers get the default lanes of the machine
// whatever GOMAXPROCS the testing package left (it sets -test.cpu before each leaf and leaves it
// there): copiers made by a benchmark after its first leaf had Lanes 1.
func TestGPUCopierLanes(t *testing.T) {
	g := newGPU(t, cudahost.Options{})
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	want := min(runtime.NumCPU(), DefaultMaxLanes)
	if got := g.copier(t, Options{}).Options().Lanes; got != want {
		t.Errorf("g.copier under GOMAXPROCS 1: Lanes %d, want %d", got, want)
	}
	if got := g.tunedCopier(t, Options{}, defaultTuning()).Options().Lanes; got != want {
		t.Errorf("g.tunedCopier under GOMAXPROCS 1: Lanes %d, want %d", got, want)
	}
}

// TestGPURoundTrip sends random data to the device and back on every path,
// for sizes around the chunk size and large odd sizes, and checks it on
// the device by the checksum kernel and byte for byte on return.
func TestGPURoundTrip(t *testing.T) {
	g := newGPU(t, cudahost.Options{})
	ctx := context.Background()
	const chunk = 1 << 20
	sizes := []int{1, chunk - 1, chunk, chunk + 1, 3*chunk + 5, 64<<20 + 3}
	if !testing.Short() {
		sizes = append(sizes, 1<<30+7)
	}
	dev := g.devMem(t, sizes[len(sizes)-1])
	for _, path := range gpuPaths {
		t.Run(path.String(), func(t *testing.T) {
			opt := Options{ChunkSize: chunk, WindowBytes: 16 * chunk, Streams: 4, DirectBelow: -1}
			switch path {
			case PathDirect:
				opt.DirectBelow = 1 << 62
			case PathRegistered:
				opt.RegisterChunk = 16 << 20 // large copies cross parts: the split is checked by the driver
			}
			c := g.copier(t, opt)
			for i, n := range sizes {
				if n > 256<<20 && (path == PathDirect || path == PathPinned) {
					continue // slow (direct) or a 1 GiB pool grow (pinned); staged and registered cover it
				}
				host, release := gpuHost(t, g, c, path, n)
				src := randomBytes(n, uint64(i)+1)
				copy(host, src)
				if p := c.PathOf(host); p != path {
					t.Fatalf("%d bytes: path %v, want %v", n, p, path)
				}
				if err := c.ToDevice(ctx, dev.Ptr(), host); err != nil {
					t.Fatalf("%d bytes: %v", n, err)
				}
				g.checkDevice(t, fmt.Sprintf("%v %d bytes", path, n), dev.Ptr(), src)
				clear(host)
				if err := c.FromDevice(ctx, host, dev.Ptr()); err != nil {
					t.Fatalf("%d bytes back: %v", n, err)
				}
				sameBytes(t, fmt.Sprintf("%v %d bytes back", path, n), host, src)
				release()
			}
			st := c.Stats()
			t.Logf("%v: H2D %+v, D2H %+v, chunks %d, staging waits %d (%v), peak staging %d",
				path, st.ToDevice.Total(), st.FromDevice.Total(), st.Chunks, st.StagingWaits, st.StagingWaitTime, st.PeakStaging)
		})
	}
}

// gpuHost returns n bytes of host memory that takes path, and its release.
func gpuHost(tb testing.TB, g *gpu, c *Copier, path Path, n int) ([]byte, func()) {
	tb.Helper()
	switch path {
	case PathPinned:
		buf, err := g.pool.Get(context.Background(), n)
		if err != nil {
			tb.Fatal(err)
		}
		return buf.Bytes(), func() { buf.Release() }
	case PathRegistered:
		b := make([]byte, n)
		r, err := c.Register(b)
		if err != nil {
			tb.Fatal(err)
		}
		return b, func() {
			if err := r.Close(); err != nil {
				tb.Error(err)
			}
		}
	}
	return make([]byte, n), func() {}
}

// TestGPUConcurrent runs 16 goroutines over two copiers that share a pool,
// with every direction and several paths, and checks every byte.
func TestGPUConcurrent(t *testing.T) {
	g := newGPU(t, cudahost.Options{})
	c1 := g.copier(t, Options{Streams: 4})
	c2 := g.copier(t, Options{ChunkSize: 1 << 20, WindowBytes: 8 << 20})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := c1
			if w%2 == 1 {
				c = c2
			}
			for i := range 4 {
				n := []int{4096 + 1, 300 << 10, 5<<20 + 3, 33<<20 + 9}[(w+i)%4]
				d, err := g.ctx.MemAlloc(n)
				if err != nil {
					t.Error(err)
					return
				}
				src := randomBytes(n, uint64(w*10+i))
				err = c.ToDeviceAsync(context.Background(), d.Ptr(), src).Wait()
				back := make([]byte, n)
				if err == nil {
					err = c.FromDevice(context.Background(), back, d.Ptr())
				}
				d.Free()
				if err != nil {
					t.Error(err)
					return
				}
				sameBytes(t, fmt.Sprintf("goroutine %d, %d bytes", w, n), back, src)
			}
		}()
	}
	wg.Wait()
}

// TestGPUCancel cancels large staged copies early, checks the error and
// that the pool is consistent, then copies the same memory in full.
func TestGPUCancel(t *testing.T) {
	g := newGPU(t, cudahost.Options{})
	c := g.copier(t, Options{})
	const n = 512 << 20
	dev := g.devMem(t, n)
	src := randomBytes(n, 42)
	for _, dir := range []Direction{HostToDevice, DeviceToHost} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		var err error
		if dir == HostToDevice {
			err = c.ToDeviceAsync(ctx, dev.Ptr(), src).Wait()
		} else {
			err = c.FromDevice(ctx, make([]byte, n), dev.Ptr())
		}
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v: got %v, want a deadline error", dir, err)
		}
		if st := c.Stats(); st.StagingBytes != 0 {
			t.Fatalf("%v: %d staging bytes held after the cancelled copy", dir, st.StagingBytes)
		}
	}
	if err := c.ToDevice(context.Background(), dev.Ptr(), src); err != nil {
		t.Fatal(err)
	}
	g.checkDevice(t, "after cancellations", dev.Ptr(), src)
	back := make([]byte, n)
	if err := c.FromDevice(context.Background(), back, dev.Ptr()); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "after cancellations", back, src)
}

// TestGPURegisterRefused checks that Register refuses what cannot be
// registered, with clear errors, and leaves nothing registered.
func TestGPURegisterRefused(t *testing.T) {
	g := newGPU(t, cudahost.Options{})
	c := g.copier(t, Options{RegisterChunk: 1 << 20})
	if _, err := c.Register(nil); !errors.Is(err, ErrRegister) {
		t.Fatalf("empty: %v", err)
	}
	buf, err := g.pool.Get(context.Background(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Release()
	if _, err := c.Register(buf.Bytes()); !errors.Is(err, ErrAlreadyRegistered) {
		t.Fatalf("pool memory: %v", err)
	}
	mem := make([]byte, 8<<20)
	r, err := c.Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(mem[1<<20 : 2<<20]); !errors.Is(err, ErrAlreadyRegistered) {
		t.Fatalf("registered twice: %v", err)
	}
	if r.Parts() != 8 && r.Parts() != 9 {
		t.Fatalf("%d parts for 8 MiB in 1 MiB parts", r.Parts())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// Memory that is not mapped any more: the driver refuses it.
	m, err := unix.Mmap(-1, 0, 4<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	unmapped := m[:4<<20]
	if err := unix.Munmap(m); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Register(unmapped); !errors.Is(err, ErrRegister) {
		if err == nil {
			r.Close()
		}
		t.Fatalf("unmapped memory: %v", err)
	} else {
		t.Logf("unmapped memory refused: %v", err)
	}
	// The whole 8 MiB registers again: nothing was left registered.
	r, err = c.Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}

// TestGPUMappedRead reads mapped pool memory with the read kernel and
// checks its sum against the CPU reference; it logs the bandwidth.
func TestGPUMappedRead(t *testing.T) {
	g := newGPU(t, cudahost.Options{Mapped: true})
	if ok, err := canMapHostMemory(g.ctx); err != nil || !ok {
		t.Fatalf("canMapHostMemory = %v, %v with a mapped backend", ok, err)
	}
	for _, n := range []int{4096, 1 << 20, 64<<20 + 16} {
		buf, err := g.pool.Get(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		copy(buf.Bytes(), randomBytes(n, uint64(n)))
		p, err := MappedPointer(buf)
		if err != nil {
			t.Fatal(err)
		}
		r, err := measureMappedRead(g.ctx, g.k, p, n, 5)
		if err != nil {
			t.Fatal(err)
		}
		if want := testkernels.ReadSum(buf.Bytes()); r.Sum != want {
			t.Fatalf("%d bytes: kernel sum %#x, want %#x", n, r.Sum, want)
		}
		t.Logf("mapped read of %d bytes: %v, %.1f GB/s", n, r.Median, r.GBps())
		buf.Release()
	}
	plain := newGPU(t, cudahost.Options{})
	buf, err := plain.pool.Get(context.Background(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Release()
	if _, err := MappedPointer(buf); !errors.Is(err, ErrNotMapped) {
		t.Fatalf("unmapped pool: %v", err)
	}
}
