package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// testContext returns a context on device 0, or skips the test when this
// machine has no CUDA driver or device.
func testContext(tb testing.TB) *Context {
	tb.Helper()
	if err := Load(); err != nil {
		if IsNoDriver(err) {
			tb.Skipf("GPU test skipped: no CUDA driver on this machine (%v); run scripts/gpu-run.sh on the GPU host", err)
		}
		tb.Fatal(err)
	}
	if n, err := DeviceCount(); err != nil || n == 0 {
		tb.Skipf("GPU test skipped: no CUDA device (count %d, %v)", n, err)
	}
	c, err := NewContext(0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return c
}

// randomBytes returns n random bytes (never all zeros) from a seeded source.
func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	fillRandom(b, seed)
	return b
}

func fillRandom(b []byte, seed uint64) {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), 1})
	r.Read(b)
}

func mustDev(tb testing.TB, c *Context, n int) *DeviceMem {
	tb.Helper()
	d, err := c.MemAlloc(n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Free() })
	return d
}

func mustHost(tb testing.TB, c *Context, n int, flags HostAllocFlags) *HostMem {
	tb.Helper()
	h, err := c.HostAlloc(n, flags)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Free() })
	return h
}

func TestGPUDeviceProperties(t *testing.T) {
	c := testContext(t)
	v, err := DriverVersion()
	if err != nil || v < 11000 {
		t.Fatalf("DriverVersion = %d, %v", v, err)
	}
	p, err := c.Device().Properties()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("driver %d, library %s, %+v", v, LibraryPath(), p)
	if p.Name == "" || p.ComputeMajor < 5 || p.TotalMem < 1<<30 || p.MultiprocessorCount < 1 {
		t.Fatalf("implausible properties %+v", p)
	}
	if !p.UnifiedAddressing {
		t.Error("64-bit Linux devices have unified addressing")
	}
	if p.AsyncEngineCount < 1 {
		t.Errorf("AsyncEngineCount = %d", p.AsyncEngineCount)
	}
}

// roundTripSizes covers 1 byte to 256 MiB, odd sizes and size-class edges.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func mmapBytes(tb testing.TB, n int) []byte {
	tb.Helper()
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Munmap(m) })
	return m
}

// TestGPUAsyncRefusesGoHeap checks that asynchronous copies refuse ordinary
// Go memory in both directions and on both call paths.
func TestGPUAsyncRefusesGoHeap(t *testing.T) {
	c := testContext(t)
	d := mustDev(t, c, 1<<20)
	s, err := c.NewStream(StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	heap := make([]byte, 1<<20)
	if IsPinned(heap) {
		t.Fatal("IsPinned(Go slice) = true")
	}
	if err := s.CopyHtoDAsync(d.Ptr(), heap); !errors.Is(err, ErrNotPinned) {
		t.Errorf("HtoDAsync from Go heap: %v", err)
	}
	if err := s.CopyDtoHAsync(heap, d.Ptr()); !errors.Is(err, ErrNotPinned) {
		t.Errorf("DtoHAsync to Go heap: %v", err)
	}
	th, err := c.LockThread()
	if err != nil {
		t.Fatal(err)
	}
	if err := th.CopyHtoDAsync(s, d.Ptr(), heap); !errors.Is(err, ErrNotPinned) {
		t.Errorf("Thread.HtoDAsync from Go heap: %v", err)
	}
	th.Unlock()
	// A slice that runs past the end of a pinned allocation is refused too.
	h := mustHost(t, c, 8192, 0)
	over := unsafe.Slice((*byte)(h.Pointer()), 8192+4096)
	if err := s.CopyHtoDAsync(d.Ptr(), over[4096:]); !errors.Is(err, ErrNotPinned) {
		t.Errorf("slice past the pinned end: %v", err)
	}
	if err := s.CopyHtoDAsync(d.Ptr(), h.Bytes()[100:5000]); err != nil {
		t.Errorf("sub-slice of pinned memory: %v", err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

// TestGPUEventTiming times a 64 MiB pinned copy with events and checks the
// figure is plausible for a PCIe or NVLink-C2C link.
func TestGPUEventTiming(t *testing.T) {
	c := testContext(t)
	const n = 64 << 20
	h := mustHost(t, c, n, 0)
	fillRandom(h.Bytes(), 9)
	d := mustDev(t, c, n)
	s, _ := c.NewStream(StreamNonBlocking)
	defer s.Destroy()
	start, _ := c.NewEvent(EventDefault)
	end, _ := c.NewEvent(EventDefault)
	defer start.Destroy()
	defer end.Destroy()
	if done, err := end.Done(); err != nil || !done {
		t.Errorf("unrecorded event: done=%v err=%v", done, err)
	}
	var best time.Duration
	for range 5 {
		if err := start.Record(s); err != nil {
			t.Fatal(err)
		}
		if err := s.CopyHtoDAsync(d.Ptr(), h.Bytes()); err != nil {
			t.Fatal(err)
		}
		if err := end.Record(s); err != nil {
			t.Fatal(err)
		}
		if err := end.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if done, err := end.Done(); err != nil || !done {
			t.Fatalf("after Synchronize: done=%v err=%v", done, err)
		}
		el, err := ElapsedTime(start, end)
		if err != nil {
			t.Fatal(err)
		}
		if best == 0 || el < best {
			best = el
		}
	}
	gbps := float64(n) / best.Seconds() / 1e9
	t.Logf("64 MiB pinned HtoD: %v, %.1f GB/s", best, gbps)
	if best <= 0 || gbps < 1 || gbps > 1000 {
		t.Fatalf("implausible timing %v (%.1f GB/s)", best, gbps)
	}
}

// TestGPUManyGoroutines runs driver call sequences from many goroutines that
// yield between calls and so move between OS threads; some goroutines clear
// the current context of their thread on purpose. A binding that set the
// context once per thread fails here with CUDA_ERROR_INVALID_CONTEXT.
func TestGPUManyGoroutines(t *testing.T) {
	c := testContext(t)
	const goroutines, iters = 64, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			if g%8 == 0 { // a foreign user: leaves its thread with no current context
				runtime.LockOSThread()
				invoke(fn.cuCtxSetCurrent, 0)
				runtime.UnlockOSThread()
			}
			s, err := c.NewStream(StreamNonBlocking)
			if err != nil {
				errs <- err
				return
			}
			defer s.Destroy()
			ev, err := c.NewEvent(EventDisableTiming)
			if err != nil {
				errs <- err
				return
			}
			defer ev.Destroy()
			h, err := c.HostAlloc(4096, 0)
			if err != nil {
				errs <- err
				return
			}
			defer h.Free()
			for i := range iters {
				d, err := c.MemAlloc(4096)
				if err != nil {
					errs <- err
					return
				}
				runtime.Gosched()
				fillRandom(h.Bytes(), uint64(g*1000+i))
				want := bytes.Clone(h.Bytes())
				if err := s.CopyHtoDAsync(d.Ptr(), h.Bytes()); err != nil {
					errs <- err
					return
				}
				runtime.Gosched()
				if err := ev.Record(s); err != nil {
					errs <- err
					return
				}
				for {
					done, err := ev.Done()
					if err != nil {
						errs <- err
						return
					}
					if done {
						break
					}
					runtime.Gosched()
				}
				clear(h.Bytes())
				if err := c.CopyDtoH(h.Bytes(), d.Ptr()); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(h.Bytes(), want) {
					errs <- fmt.Errorf("goroutine %d iteration %d: data differs", g, i)
					return
				}
				if err := d.Free(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestGPUMisuse checks double frees and use after close.
func TestGPUMisuse(t *testing.T) {
	c := testContext(t)
	h, err := c.HostAlloc(4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Free(); err != nil {
		t.Fatal(err)
	}
	if err := h.Free(); !errors.Is(err, ErrClosed) {
		t.Errorf("second HostMem.Free: %v", err)
	}
	if IsPinned(h.Bytes()) {
		t.Error("freed host memory still counted as pinned")
	}
	d, _ := c.MemAlloc(64)
	d.Free()
	if err := d.Free(); !errors.Is(err, ErrClosed) {
		t.Errorf("second DeviceMem.Free: %v", err)
	}
	s, _ := c.NewStream(0)
	s.Destroy()
	if err := s.Destroy(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Destroy: %v", err)
	}
	if _, err := c.HostAlloc(0, 0); !errors.Is(err, ErrSize) {
		t.Errorf("HostAlloc(0): %v", err)
	}
	if _, err := c.HostAlloc(-1, 0); !errors.Is(err, ErrSize) {
		t.Errorf("HostAlloc(-1): %v", err)
	}
	if _, err := c.MemAlloc(1 << 50); !errors.Is(err, ErrSize) && !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("MemAlloc(1<<50): %v", err)
	}
	// Registering twice, and registering nothing.
	m := mmapBytes(t, 1<<20)
	r, err := c.HostRegister(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.HostRegister(m, 0); !errors.Is(err, ErrAlreadyRegistered) {
		t.Errorf("second HostRegister: %v", err)
	}
	r.Free()
	if _, err := c.HostRegister(nil, 0); !errors.Is(err, ErrSize) {
		t.Errorf("HostRegister(nil): %v", err)
	}
	// Memory that is not mapped at all.
	hole, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	bad := hole[:4096:4096]
	if err := unix.Munmap(hole); err != nil { // leaves bad pointing at nothing
		t.Fatal(err)
	}
	if _, err := c.HostRegister(bad, 0); err == nil {
		t.Error("HostRegister of an unmapped address succeeded")
	}

	c2, err := NewContext(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c2.MemAlloc(64); !errors.Is(err, ErrClosed) {
		t.Errorf("MemAlloc after Close: %v", err)
	}
	if _, err := NewContext(1 << 30); err == nil {
		t.Error("NewContext(huge ordinal) succeeded")
	}
}
