package testkernels

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/pinpool/pinpool/cuda"
	"golang.org/x/sys/unix"
)

// The kernels on a GPU: each against its CPU reference, and the cuda
// package's copies checked on the device by the checksum kernel. Without a
// driver or device every test here skips.

// testContext returns a context on device 0, or skips the test when this
// machine has no CUDA driver or device.
func testContext(tb testing.TB) *cuda.Context {
	tb.Helper()
	if err := cuda.Load(); err != nil {
		if cuda.IsNoDriver(err) {
			tb.Skipf("GPU test skipped: no CUDA driver on this machine (%v); run scripts/gpu-run.sh on the GPU host", err)
		}
		tb.Fatal(err)
	}
	if n, err := cuda.DeviceCount(); err != nil || n == 0 {
		tb.Skipf("GPU test skipped: no CUDA device (count %d, %v)", n, err)
	}
	c, err := cuda.NewContext(0)
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

// randomBytes returns n random bytes from a seeded source.
func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	fillRandom(b, seed)
	return b
}

func fillRandom(b []byte, seed uint64) {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), 1})
	r.Read(b)
}

func mustDev(tb testing.TB, c *cuda.Context, n int) *cuda.DeviceMem {
	tb.Helper()
	d, err := c.MemAlloc(n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Free() })
	return d
}

func mustHost(tb testing.TB, c *cuda.Context, n int, flags cuda.HostAllocFlags) *cuda.HostMem {
	tb.Helper()
	h, err := c.HostAlloc(n, flags)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Free() })
	return h
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

// TestGPULoadZeroContext: a zero Context is refused with a typed error.
func TestGPULoadZeroContext(t *testing.T) {
	testContext(t) // skips without a driver, where every call fails alike
	if _, err := Load(&cuda.Context{}); !errors.Is(err, cuda.ErrInvalidDevice) {
		t.Fatalf("Load of a zero Context: %v, want ErrInvalidDevice", err)
	}
}

var roundTripSizes = []int{1, 3, 4095, 4096, 4097, 65535, 65536 + 7, 1 << 20, 3110400, 16<<20 + 7, 64 << 20, 256 << 20}

// TestGPURoundTrip sends random data through every copy kind and checks it
// byte for byte on return and by the checksum kernel on the device.
func TestGPURoundTrip(t *testing.T) {
	c := testContext(t)
	k, err := Load(c)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	s, err := c.NewStream(cuda.StreamNonBlocking)
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
			for _, flags := range []cuda.HostAllocFlags{0, cuda.HostAllocPortable, cuda.HostAllocWriteCombined, cuda.HostAllocDeviceMap} {
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
			reg, err := c.HostRegister(m, cuda.HostRegisterPortable)
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
			if err := s.CopyHtoDAsync(d1.Ptr(), m); !errors.Is(err, cuda.ErrNotPinned) {
				t.Fatalf("async copy from unregistered mmap memory: %v, want cuda.ErrNotPinned", err)
			}
		})
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
	k, err := Load(c)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	for _, n := range []int{16, 17, 4096 + 5, 1 << 20, 32<<20 + 3} {
		h := mustHost(t, c, n, cuda.HostAllocDeviceMap|cuda.HostAllocPortable)
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
	if _, err := plain.DevicePointer(); !errors.Is(err, cuda.ErrNotMapped) {
		t.Errorf("DevicePointer of unmapped memory: %v", err)
	}
	// With unified addressing the driver reports all pinned memory as
	// portable and mapped (0x3); write-combining must not be reported.
	if f, err := plain.Flags(); err != nil || f&uint32(cuda.HostAllocWriteCombined) != 0 {
		t.Errorf("Flags of default memory = %#x, %v", f, err)
	}
	wc := mustHost(t, c, 4096, cuda.HostAllocWriteCombined|cuda.HostAllocDeviceMap)
	if f, err := wc.Flags(); err != nil || f&uint32(cuda.HostAllocWriteCombined) == 0 {
		t.Errorf("Flags of write-combined memory = %#x, %v", f, err)
	}
}

func TestGPUFillKernel(t *testing.T) {
	c := testContext(t)
	k, err := Load(c)
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
	if _, err := m.Function("no_such_kernel"); !errors.Is(err, cuda.ErrNotFound) {
		t.Errorf("missing kernel: %v", err)
	}
	if err := m.Unload(); err != nil {
		t.Fatal(err)
	}
	if err := m.Unload(); !errors.Is(err, cuda.ErrClosed) {
		t.Errorf("second Unload: %v", err)
	}
	if _, err := c.LoadModule(".version 7.0\n.target sm_50\nthis is not ptx"); err == nil || !strings.Contains(err.Error(), "cuModuleLoadDataEx") {
		t.Errorf("bad PTX: %v", err)
	}
}
