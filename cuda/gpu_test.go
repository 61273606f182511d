package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
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
var roundTripSizes = []int{1, 3, 4095, 4096, 4097, 65535, 65536 + 7, 1 << 20, 3110400, 16<<20 + 7, 64 << 20, 256 << 20}

// TestGPURoundTrip sends random data through every copy kind and checks it
// byte for byte on return and by the checksum kernel on the device.
func TestGPURoundTrip(t *testing.T) {
	c := testContext(t)
	k, err := c.LoadKernels()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	s, err := c.NewStream(StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	for i, n := range roundTripSizes {
		if testing.Short() && n > 16<<20 {
			continue
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			src := randomBytes(n, uint64(i)+1)
			want := Checksum(src)
			d1, d2 := mustDev(t, c, n), mustDev(t, c, n)

			// Pageable, synchronous.
			if err := c.CopyHtoD(d1.Ptr(), src); err != nil {
				t.Fatal(err)
			}
			if got, err := k.Checksum(s, d1.Ptr(), n); err != nil || got != want {
				t.Fatalf("device checksum after pageable HtoD = %#x, %v; want %#x", got, err, want)
			}
			if err := c.CopyDtoD(d2.Ptr(), d1.Ptr(), n); err != nil {
				t.Fatal(err)
			}
			back := make([]byte, n)
			if err := c.CopyDtoH(back, d2.Ptr()); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, src) {
				t.Fatalf("pageable round trip differs at %d", firstDiff(back, src))
			}

			// Pinned, asynchronous, both directions, plus DtoD async.
			for _, flags := range []HostAllocFlags{0, HostAllocPortable, HostAllocWriteCombined, HostAllocDeviceMap} {
				h := mustHost(t, c, n, flags)
				copy(h.Bytes(), src)
				if err := c.MemsetD8(d1.Ptr(), 0, n); err != nil {
					t.Fatal(err)
				}
				if err := s.CopyHtoDAsync(d1.Ptr(), h.Bytes()); err != nil {
					t.Fatal(err)
				}
				if err := s.CopyDtoDAsync(d2.Ptr(), d1.Ptr(), n); err != nil {
					t.Fatal(err)
				}
				if got, err := k.Checksum(s, d2.Ptr(), n); err != nil || got != want {
					t.Fatalf("flags %#x: device checksum = %#x, %v; want %#x", flags, got, err, want)
				}
				out := mustHost(t, c, n, 0)
				if err := s.CopyDtoHAsync(out.Bytes(), d2.Ptr()); err != nil {
					t.Fatal(err)
				}
				if err := s.Synchronize(); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out.Bytes(), src) {
					t.Fatalf("flags %#x: pinned round trip differs at %d", flags, firstDiff(out.Bytes(), src))
				}
			}

			// Registered mmap memory, asynchronous.
			m := mmapBytes(t, n)
			copy(m, src)
			reg, err := c.HostRegister(m, HostRegisterPortable)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.CopyHtoDAsync(d1.Ptr(), m); err != nil {
				t.Fatal(err)
			}
			clear(back)
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			if err := c.CopyDtoH(back, d1.Ptr()); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, src) {
				t.Fatalf("registered round trip differs at %d", firstDiff(back, src))
			}
			if err := reg.Free(); err != nil {
				t.Fatal(err)
			}
			if err := s.CopyHtoDAsync(d1.Ptr(), m); !errors.Is(err, ErrNotPinned) {
				t.Fatalf("async copy from unregistered mmap memory: %v, want ErrNotPinned", err)
			}
		})
	}
}

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

// TestGPUMappedReadKernel reads mapped host memory from the device through
// its device pointer with both reduction kernels.
func TestGPUMappedReadKernel(t *testing.T) {
	c := testContext(t)
	p, _ := c.Device().Properties()
	if !p.CanMapHostMemory {
		t.Skip("device cannot map host memory")
	}
	k, err := c.LoadKernels()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	for _, n := range []int{16, 17, 4096 + 5, 1 << 20, 32<<20 + 3} {
		h := mustHost(t, c, n, HostAllocDeviceMap|HostAllocPortable)
		fillRandom(h.Bytes(), uint64(n))
		dp, err := h.DevicePointer()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := k.ReadSum(nil, dp, n); err != nil || got != ReadSum(h.Bytes()) {
			t.Fatalf("%d: mapped ReadSum = %#x, %v; want %#x", n, got, err, ReadSum(h.Bytes()))
		}
		if got, err := k.Checksum(nil, dp, n); err != nil || got != Checksum(h.Bytes()) {
			t.Fatalf("%d: mapped Checksum = %#x, %v; want %#x", n, got, err, Checksum(h.Bytes()))
		}
	}
	plain := mustHost(t, c, 4096, 0)
	if _, err := plain.DevicePointer(); !errors.Is(err, ErrNotMapped) {
		t.Errorf("DevicePointer of unmapped memory: %v", err)
	}
	// With unified addressing the driver reports all pinned memory as
	// portable and mapped (0x3); write-combining must not be reported.
	if f, err := plain.Flags(); err != nil || f&uint32(HostAllocWriteCombined) != 0 {
		t.Errorf("Flags of default memory = %#x, %v", f, err)
	}
	wc := mustHost(t, c, 4096, HostAllocWriteCombined|HostAllocDeviceMap)
	if f, err := wc.Flags(); err != nil || f&uint32(HostAllocWriteCombined) == 0 {
		t.Errorf("Flags of write-combined memory = %#x, %v", f, err)
	}
}

func TestGPUFillKernel(t *testing.T) {
	c := testContext(t)
	k, err := c.LoadKernels()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	for _, n := range []int{1, 7, 4096, 1<<20 + 3, 64 << 20} {
		d := mustDev(t, c, n+8)
		if err := c.MemsetD8(d.Ptr(), 0xAB, n+8); err != nil {
			t.Fatal(err)
		}
		if err := k.Fill(nil, d.Ptr(), n, 0x1234+uint32(n)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n+8)
		if err := c.CopyDtoH(got, d.Ptr()); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, n)
		FillPattern(want, 0x1234+uint32(n))
		if !bytes.Equal(got[:n], want) {
			t.Fatalf("%d: fill differs at %d", n, firstDiff(got[:n], want))
		}
		if !bytes.Equal(got[n:], bytes.Repeat([]byte{0xAB}, 8)) {
			t.Fatalf("%d: fill wrote past the end: %x", n, got[n:])
		}
	}
}

func TestGPUEmbeddedPTXHeader(t *testing.T) {
	c := testContext(t)
	if !strings.Contains(kernelsPTX, ".version 7.0") || !strings.Contains(kernelsPTX, ".target sm_50") {
		t.Fatal("embedded PTX is not PTX 7.0 / sm_50")
	}
	m, err := c.LoadModule(kernelsPTX)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Function("no_such_kernel"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing kernel: %v", err)
	}
	if err := m.Unload(); err != nil {
		t.Fatal(err)
	}
	if err := m.Unload(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Unload: %v", err)
	}
	if _, err := c.LoadModule(".version 7.0\n.target sm_50\nthis is not ptx"); err == nil || !strings.Contains(err.Error(), "cuModuleLoadDataEx") {
		t.Errorf("bad PTX: %v", err)
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
