package cudahost

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/internal/testkernels"
)

// newOrSkip returns a Backend for opt, closed at the end of the test, or
// skips the test when this machine has no CUDA driver or device, or when
// the device cannot do what opt asks.
func newOrSkip(tb testing.TB, opt Options) *Backend {
	tb.Helper()
	b, err := New(opt)
	switch {
	case cuda.IsNoDriver(err):
		tb.Skipf("GPU test skipped: no CUDA driver or device on this machine (%v); run scripts/gpu-run.sh on the GPU host", err)
	case errors.Is(err, ErrUnsupported), errors.Is(err, ErrCannotMap):
		tb.Skipf("GPU test skipped: the device cannot do %+v: %v", opt, err)
	case err != nil:
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := b.Close(); err != nil && !errors.Is(err, ErrClosed) {
			tb.Errorf("Close: %v", err)
		}
	})
	return b
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 7}).Read(b)
	return b
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// gpuEnv is what checkChunk needs on the device: a stream, the kernels, a
// device buffer and a pinned scratch buffer of at least maxSize bytes.
type gpuEnv struct {
	b       *Backend
	s       *cuda.Stream
	k       *testkernels.Kernels
	dev     *cuda.DeviceMem
	scratch *cuda.HostMem
}

func newEnv(t *testing.T, b *Backend, maxSize int) *gpuEnv {
	t.Helper()
	ctx := b.Context()
	e := &gpuEnv{b: b}
	var err error
	if e.s, err = ctx.NewStream(cuda.StreamNonBlocking); err != nil {
		t.Fatal(err)
	}
	if e.k, err = testkernels.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if e.dev, err = ctx.MemAlloc(maxSize); err != nil {
		t.Fatal(err)
	}
	if e.scratch, err = ctx.HostAlloc(maxSize, 0); err != nil {
		t.Fatal(err)
	}
	// Registered before newOrSkip's Close runs (cleanups run last first).
	t.Cleanup(func() {
		e.scratch.Free()
		e.dev.Free()
		e.k.Close()
		e.s.Destroy()
	})
	return e
}

// checkChunk checks that c is pinned memory the device accepts: random data
// goes to the device through an asynchronous copy (checked there by the
// checksum kernel) and comes back into the chunk (or, for read-only memory,
// into a scratch buffer); mapped chunks are also read and written by kernels
// through their device pointer.
func (e *gpuEnv) checkChunk(t *testing.T, c *Chunk, seed uint64) {
	t.Helper()
	opt := e.b.Options()
	n := c.Len()
	mem := c.Bytes()
	switch {
	case len(mem) != n || cap(mem) != n:
		t.Fatalf("len %d, cap %d, Len %d", len(mem), cap(mem), n)
	case uintptr(c.Pointer())%4096 != 0 || c.Pointer() != unsafe.Pointer(&mem[0]):
		t.Fatalf("Pointer %p not 4 KiB aligned or not &Bytes()[0]", c.Pointer())
	case !cuda.IsPinned(mem):
		t.Fatalf("%d bytes at %p not pinned according to the driver", n, c.Pointer())
	}
	src := randomBytes(n, seed)
	copy(mem, src)
	want := testkernels.Checksum(src)
	dev := e.dev.Ptr()
	if err := e.s.CopyHtoDAsync(dev, mem); err != nil {
		t.Fatalf("CopyHtoDAsync from the chunk: %v", err)
	}
	if got, err := e.k.Checksum(e.s, dev, n); err != nil || got != want {
		t.Fatalf("device checksum after HtoD = %#x, %v; want %#x", got, err, want)
	}
	back := mem
	if opt.ReadOnly {
		back = e.scratch.Bytes()[:n]
	}
	clear(back)
	if err := e.s.CopyDtoHAsync(back, dev); err != nil {
		t.Fatalf("CopyDtoHAsync into the chunk: %v", err)
	}
	if err := e.s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, src) {
		t.Fatalf("round trip differs at byte %d", firstDiff(back, src))
	}

	d, err := c.DevicePointer()
	if !opt.Mapped {
		if !errors.Is(err, cuda.ErrNotMapped) {
			t.Fatalf("DevicePointer of an unmapped chunk: %#x, %v; want cuda.ErrNotMapped", d, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("DevicePointer: %v", err)
	}
	copy(mem, src)
	if got, err := e.k.Checksum(e.s, cuda.DevicePtr(d), n); err != nil || got != want {
		t.Fatalf("zero-copy checksum through the device pointer = %#x, %v; want %#x", got, err, want)
	}
	if opt.ReadOnly {
		return // the device may not write it
	}
	if err := e.k.Fill(e.s, cuda.DevicePtr(d), n, uint32(seed)); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	testkernels.FillPattern(src, uint32(seed))
	if !bytes.Equal(mem, src) {
		t.Fatalf("zero-copy fill by the device differs at byte %d", firstDiff(mem, src))
	}
}

// gpuConfigs are the method and flag combinations every GPU test covers.
var gpuConfigs = []Options{
	{Method: HostAlloc},
	{Method: HostAlloc, Portable: true},
	{Method: HostAlloc, Mapped: true},
	{Method: HostAlloc, WriteCombined: true},
	{Method: HostAlloc, WriteCombined: true, Mapped: true, Portable: true},
	{Method: Register},
	{Method: Register, Portable: true},
	{Method: Register, Mapped: true},
	{Method: Register, ReadOnly: true},
	{Method: Register, ReadOnly: true, Mapped: true},
	{Method: Register, HugePages: true},
	{Method: Register, HugePages: true, Mapped: true, Portable: true},
	{},
}

// gpuSizes are the allocation sizes of TestGPUBackends: a page, 1 MiB, a
// 1080p NV12 frame rounded up to pages, 64 MiB.
var gpuSizes = []int{4096, 1 << 20, 3112960, 64 << 20}

func TestGPUBackends(t *testing.T) {
	for i, opt := range gpuConfigs {
		name := opt.Method.String()
		if opt.Method != Auto {
			name = opt.name()
		}
		t.Run(name, func(t *testing.T) {
			b := newOrSkip(t, opt)
			if opt.Method != Auto && b.Name() != opt.name() {
				t.Errorf("Name %q, want %q", b.Name(), opt.name())
			}
			e := newEnv(t, b, gpuSizes[len(gpuSizes)-1])
			for j, n := range gpuSizes {
				c, err := b.Alloc(n)
				if err != nil {
					t.Fatalf("Alloc(%d): %v", n, err)
				}
				e.checkChunk(t, c, uint64(i*100+j+1))
				if err := c.Free(); err != nil {
					t.Fatalf("Free: %v", err)
				}
				if err := c.Free(); !errors.Is(err, ErrFreed) {
					t.Fatalf("second Free: %v; want ErrFreed", err)
				}
				if c.Bytes() != nil {
					t.Fatal("Bytes not nil after Free")
				}
			}
			if _, err := b.Alloc(3110400); !errors.Is(err, ErrInvalidSize) {
				t.Errorf("Alloc(3110400): %v; want ErrInvalidSize", err)
			}
		})
	}
}

// TestGPURegisterChunked registers a 9 MiB chunk in 1 MiB parts. Copies
// within a part must work everywhere in the chunk, and so must a copy that
// spans two registrations, which the driver refuses
// (CUDA_ERROR_INVALID_VALUE) and package cuda therefore cuts at the
// boundary.
func TestGPURegisterChunked(t *testing.T) {
	for _, mapped := range []bool{false, true} {
		t.Run(fmt.Sprintf("mapped=%v", mapped), func(t *testing.T) {
			const mib = 1 << 20
			b := newOrSkip(t, Options{Method: Register, RegisterChunk: mib, Mapped: mapped})
			e := newEnv(t, b, 9*mib)
			c, err := b.Alloc(9 * mib)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.parts) != 9 {
				t.Fatalf("%d registrations, want 9", len(c.parts))
			}
			mem := c.Bytes()
			for part := range 9 {
				src := mem[part*mib : (part+1)*mib]
				data := randomBytes(mib, uint64(part)+5)
				copy(src, data)
				if err := e.s.CopyHtoDAsync(e.dev.Ptr(), src); err != nil {
					t.Fatalf("part %d: %v", part, err)
				}
				if err := e.s.Synchronize(); err != nil { // the copy reads src until then
					t.Fatal(err)
				}
				clear(src)
				if err := e.s.CopyDtoHAsync(src, e.dev.Ptr()); err != nil {
					t.Fatalf("part %d: %v", part, err)
				}
				if err := e.s.Synchronize(); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(src, data) {
					t.Fatalf("part %d: round trip differs at byte %d", part, firstDiff(src, data))
				}
			}
			// Across the 1 MiB boundary, both ways.
			span := mem[mib-8192 : 2*mib+8192]
			data := randomBytes(len(span), 77)
			copy(span, data)
			if err := e.s.CopyHtoDAsync(e.dev.Ptr(), span); err != nil {
				t.Fatalf("copy across registrations to the device: %v", err)
			}
			if err := e.s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			clear(span)
			if err := e.s.CopyDtoHAsync(span, e.dev.Ptr()); err != nil {
				t.Fatalf("copy across registrations from the device: %v", err)
			}
			if err := e.s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(span, data) {
				t.Fatalf("copy across registrations corrupted data at byte %d", firstDiff(span, data))
			}
			if err := c.Free(); err != nil {
				t.Fatal(err)
			}
			if err := c.Free(); !errors.Is(err, ErrFreed) {
				t.Fatalf("second Free: %v", err)
			}
			// Everything was unregistered: the same addresses can be
			// registered again by a new chunk without ErrAlreadyRegistered.
			c2, err := b.Alloc(9 * mib)
			if err != nil {
				t.Fatal(err)
			}
			if err := c2.Free(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGPUAllocAfterClose checks that Close stops Alloc but keeps the context
// alive for the chunks still out, and releases it with the last Free.
func TestGPUAllocAfterClose(t *testing.T) {
	b := newOrSkip(t, Options{})
	c, err := b.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if c2, err := b.Alloc(1 << 20); !errors.Is(err, ErrClosed) || c2 != nil {
		t.Fatalf("Alloc after Close = %v, %v; want ErrClosed", c2, err)
	}
	if err := b.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	// The chunk and the context still work.
	ctx := b.Context()
	d, err := ctx.MemAlloc(c.Len())
	if err != nil {
		t.Fatalf("MemAlloc after Close with a chunk out: %v", err)
	}
	src := randomBytes(c.Len(), 3)
	copy(c.Bytes(), src)
	s := ctx.DefaultStream()
	if err := s.CopyHtoDAsync(d.Ptr(), c.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, c.Len())
	if err := ctx.CopyDtoH(back, d.Ptr()); err != nil || !bytes.Equal(back, src) {
		t.Fatalf("copy after Close: %v, equal %v", err, bytes.Equal(back, src))
	}
	if err := d.Free(); err != nil {
		t.Fatal(err)
	}
	if err := c.Free(); err != nil {
		t.Fatalf("Free after Close: %v", err)
	}
	// The last Free released the context.
	if err := ctx.Synchronize(); !errors.Is(err, cuda.ErrClosed) {
		t.Fatalf("context after the last Free: %v; want cuda.ErrClosed", err)
	}
}

// TestGPUAuto logs and checks the method Auto picks on this device.
func TestGPUAuto(t *testing.T) {
	b := newOrSkip(t, Options{})
	p := b.Properties()
	want := HostAlloc
	if canRegister(p) {
		want = Register
	}
	t.Logf("%s: %s, Auto picked %v (%s)", describe(p), p.PCIAddress(), b.Options().Method, b.Name())
	if got := b.Options().Method; got != want {
		t.Fatalf("Auto picked %v, want %v", got, want)
	}
}

// TestGPUNUMA binds a register chunk to the node next to the device.
func TestGPUNUMA(t *testing.T) {
	probe := newOrSkip(t, Options{Method: HostAlloc})
	node := probe.Properties().HostNUMAID
	if node < 0 {
		t.Skip("the device reports no host NUMA node")
	}
	b := newOrSkip(t, Options{Method: Register, BindNUMA: true, NUMANode: node})
	e := newEnv(t, b, 8<<20)
	c, err := b.Alloc(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	e.checkChunk(t, c, 8)
	if err := c.Free(); err != nil {
		t.Fatal(err)
	}
}

// TestGPUConcurrent allocates and frees from many goroutines that yield
// between driver calls, so that they move between OS threads.
func TestGPUConcurrent(t *testing.T) {
	for _, m := range []Method{HostAlloc, Register} {
		t.Run(m.String(), func(t *testing.T) {
			b := newOrSkip(t, Options{Method: m, Mapped: true})
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 10 {
						c, err := b.Alloc((g + 1) * 65536)
						if err != nil {
							t.Error(err)
							return
						}
						runtime.Gosched()
						if !cuda.IsPinned(c.Bytes()) {
							t.Error("chunk not pinned")
						}
						if _, err := c.DevicePointer(); err != nil {
							t.Error(err)
						}
						c.Bytes()[i] = byte(g)
						runtime.Gosched()
						if err := c.Free(); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
