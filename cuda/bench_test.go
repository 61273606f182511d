package cuda

import (
	"fmt"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkCallOverhead measures the cost of one trivial driver call with
// and without the context handling around it, through purego (raw/) and
// through the single-transition trampoline (fast/), and of the public hot
// methods (method/). The goal is <= 100 ns per call including the context
// handling; scripts/ref/callcost.c times the same driver calls from C.
func BenchmarkCallOverhead(b *testing.B) {
	c := testContext(b)
	s, err := c.NewStream(StreamNonBlocking)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	ev, err := c.NewEvent(EventDisableTiming)
	if err != nil {
		b.Fatal(err)
	}
	defer ev.Destroy()
	if err := ev.Record(s); err != nil {
		b.Fatal(err)
	}
	s.Synchronize()
	b.Logf("fast trampoline: %v", fastPath)

	b.Run("raw/cuCtxGetCurrent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var h uintptr
			invoke(fn.cuCtxGetCurrent, uintptr(unsafe.Pointer(&h)))
		}
	})
	cell := new(uintptr) // heap: fastCall arguments must not point into the stack
	b.Run("fast/cuCtxGetCurrent+context", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := fastCall(c.handle, fn.cuCtxGetCurrent, uintptr(unsafe.Pointer(cell)), 0, 0, 0, 0, 0); r != Success {
				b.Fatal(resultErr("cuCtxGetCurrent", r))
			}
		}
		if *cell != c.handle {
			b.Fatalf("current context %#x, want %#x", *cell, c.handle)
		}
	})
	b.Run("fast/cuCtxGetCurrent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fastCall(0, fn.cuCtxGetCurrent, uintptr(unsafe.Pointer(cell)), 0, 0, 0, 0, 0)
		}
	})
	b.Run("raw/cuStreamQuery", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			invoke(fn.cuStreamQuery, s.handle)
		}
	})
	b.Run("method/StreamQuery", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Query(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("method/EventDone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ev.Done(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("thread/StreamQuery", func(b *testing.B) {
		th, err := c.LockThread()
		if err != nil {
			b.Fatal(err)
		}
		defer th.Unlock()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := th.StreamQuery(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("method/StreamQuery-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Query(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkCopyHtoDAsync4K measures issuing plus completing one 4 KiB pinned
// copy: the latency that small staged transfers pay.
func BenchmarkCopyHtoDAsync4K(b *testing.B) {
	c := testContext(b)
	h := mustHost(b, c, 4096, 0)
	d := mustDev(b, c, 4096)
	s, _ := c.NewStream(StreamNonBlocking)
	defer s.Destroy()
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.CopyHtoDAsync(d.Ptr(), h.Bytes()); err != nil {
			b.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIsPinned times IsPinned on a pageable 1080p frame (3,110,400
// bytes of Go memory, which the driver is asked about) back to back
// (pause=0) and as a paced stream of frames finds it, after a pause of 3
// and 33 ms (the time of that call alone, reported as call-ns).
func BenchmarkIsPinned(b *testing.B) {
	testContext(b)
	frame := make([]byte, 1920*1080*3/2)
	for _, pause := range []time.Duration{0, 3 * time.Millisecond, 33 * time.Millisecond} {
		b.Run(fmt.Sprintf("pause=%v", pause), func(b *testing.B) {
			var calls time.Duration
			for b.Loop() {
				if pause > 0 {
					time.Sleep(pause)
				}
				t0 := time.Now()
				if IsPinned(frame) {
					b.Fatal("a Go slice is pinned")
				}
				calls += time.Since(t0)
			}
			b.ReportMetric(float64(calls.Nanoseconds())/float64(b.N), "call-ns")
		})
	}
}
