package pinpool

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/internal/testkernels"
)

// gpuBackend returns a CUDA backend of the given method on device 0, or
// skips the test without a GPU.
func gpuBackend(t testing.TB, m cudahost.Method) *cudahost.Backend {
	t.Helper()
	b, err := cudahost.New(cudahost.Options{Method: m})
	if err != nil {
		if cuda.IsNoDriver(err) {
			t.Skipf("GPU test skipped: no CUDA driver or device (%v); run scripts/gpu-run.sh on the GPU host", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

var gpuMethods = []cudahost.Method{cudahost.HostAlloc, cudahost.Register}

func TestGPUDefaultBackend(t *testing.T) {
	gpuBackend(t, cudahost.Auto) // skips without a GPU
	p, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if st := p.Stats(); !strings.HasPrefix(st.Backend, "cuda:0/") {
		t.Fatalf("zero Options on a GPU host use %q", st.Backend)
	}
	t.Logf("default backend: %s", p.Backend().Name())
}

// TestGPUPoolCopies checks, for both CUDA methods, that every size class the
// pool hands out is pinned memory the driver accepts for asynchronous
// copies, and that data arrives intact.
func TestGPUPoolCopies(t *testing.T) {
	for _, m := range gpuMethods {
		t.Run(m.String(), func(t *testing.T) {
			be := gpuBackend(t, m)
			ctx := be.Context()
			p, err := New(Options{Backend: CUDABackend(be)})
			if err != nil {
				t.Fatal(err)
			}
			k, err := testkernels.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			s, err := ctx.NewStream(cuda.StreamNonBlocking)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Destroy()
			for i, n := range []int{1, 4096, 5000, 64 << 10, 1 << 20, frame, 16<<20 + 3} {
				buf, err := p.Get(context.Background(), n)
				if err != nil {
					t.Fatal(err)
				}
				testkernels.FillPattern(buf.Bytes(), uint32(i))
				d, err := ctx.MemAlloc(n)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.CopyHtoDAsync(d.Ptr(), buf.Bytes()); err != nil {
					t.Fatalf("%d bytes: %v", n, err)
				}
				if got, err := k.Checksum(s, d.Ptr(), n); err != nil || got != testkernels.Checksum(buf.Bytes()) {
					t.Fatalf("%d bytes: checksum %#x, %v", n, got, err)
				}
				back, _ := p.Get(context.Background(), n)
				if err := s.CopyDtoHAsync(back.Bytes(), d.Ptr()); err != nil {
					t.Fatal(err)
				}
				s.Synchronize()
				if !bytes.Equal(back.Bytes(), buf.Bytes()) {
					t.Fatalf("%d bytes: round trip differs", n)
				}
				buf.Release()
				back.Release()
				d.Free()
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if st := p.Stats(); st.BytesHeld != 0 {
				t.Fatalf("after Close: %+v", st)
			}
		})
	}
}

// TestGPUFenceGatedReuse is the real test of ReleaseAfter: each cycle writes
// a unique pattern into a pooled buffer, copies it asynchronously to its own
// region of device memory, releases the buffer after an event recorded
// behind the copy, and at once takes buffers of the same size and
// overwrites them. Large copies queued now and then keep the small ones in
// flight. If the pool handed out memory before its copy completed, the
// overwrite would reach the device: every region is verified with the
// checksum kernel at the end.
func TestGPUFenceGatedReuse(t *testing.T) {
	for _, m := range gpuMethods {
		t.Run(m.String(), func(t *testing.T) {
			be := gpuBackend(t, m)
			ctx := be.Context()
			p, err := New(Options{Backend: CUDABackend(be)})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			k, err := testkernels.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			s, err := ctx.NewStream(cuda.StreamNonBlocking)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Destroy()
			const n, cycles = 64 << 10, 5000
			dev, err := ctx.MemAlloc(n * cycles)
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Free()
			slowSrc, _ := p.Get(context.Background(), 64<<20)
			slowDst, _ := ctx.MemAlloc(64 << 20)
			defer slowDst.Free()
			events := make([]*cuda.Event, 256)
			for i := range events {
				if events[i], err = ctx.NewEvent(cuda.EventDisableTiming); err != nil {
					t.Fatal(err)
				}
				defer events[i].Destroy()
			}
			for i := range cycles {
				if i%50 == 0 { // a 64 MiB copy keeps the next small ones queued
					if err := s.CopyHtoDAsync(slowDst.Ptr(), slowSrc.Bytes()); err != nil {
						t.Fatal(err)
					}
				}
				b, err := p.Get(context.Background(), n)
				if err != nil {
					t.Fatal(err)
				}
				testkernels.FillPattern(b.Bytes(), uint32(i))
				if err := s.CopyHtoDAsync(dev.Ptr()+cuda.DevicePtr(i*n), b.Bytes()); err != nil {
					t.Fatal(err)
				}
				ev := events[i%len(events)]
				if err := ev.Record(s); err != nil {
					t.Fatal(err)
				}
				if err := b.ReleaseAfter(ev); err != nil {
					t.Fatal(err)
				}
				// Take buffers at once and scribble on them.
				for range 2 {
					x, err := p.Get(context.Background(), n)
					if err != nil {
						t.Fatal(err)
					}
					clear(x.Bytes())
					x.Bytes()[0] = 0xFF
					x.Release()
				}
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			slowSrc.Release()
			want := make([]byte, n)
			corrupt := 0
			for i := range cycles {
				testkernels.FillPattern(want, uint32(i))
				got, err := k.Checksum(s, dev.Ptr()+cuda.DevicePtr(i*n), n)
				if err != nil {
					t.Fatal(err)
				}
				if got != testkernels.Checksum(want) {
					corrupt++
				}
			}
			st := p.Stats()
			t.Logf("%d cycles, %d regions corrupt; %d released after fence, %d grows, peak held %d", cycles, corrupt, st.ReleasedAfterFence, st.Grows, st.PeakHeld)
			if corrupt != 0 {
				t.Fatalf("%d of %d regions corrupt: memory reused before its copy completed", corrupt, cycles)
			}
			if st.ReleasedAfterFence == 0 {
				t.Fatal("no buffer came back through a fence")
			}
		})
	}
}
