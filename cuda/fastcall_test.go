//go:build linux && amd64

package cuda

import (
	"bytes"
	"runtime"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

// libcSym returns the address of a libc function for exercising fastCall
// without a GPU.
func libcSym(t testing.TB, name string) uintptr {
	t.Helper()
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	a, err := purego.Dlsym(h, name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// withSetCurrent swaps the function fastCall uses to make a context current.
func withSetCurrent(t testing.TB, f uintptr) {
	old := fn.cuCtxSetCurrent
	fn.cuCtxSetCurrent = f
	t.Cleanup(func() { fn.cuCtxSetCurrent = old })
}

// TestFastCallSixArgs calls mmap, whose six arguments land in the six
// argument registers, through fastCall; a misplaced register makes mmap fail.
func TestFastCallSixArgs(t *testing.T) {
	mmap, munmap := libcSym(t, "mmap"), libcSym(t, "munmap")
	fd := -1
	r := fastCallPtr(0, mmap, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON, uintptr(fd), 0)
	if r == 0 || r == ^uintptr(0) {
		t.Fatalf("mmap through fastCall returned %#x", r)
	}
	m := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), r)), 1<<16)
	m[0], m[1<<16-1] = 1, 2
	if got := fastCall(0, munmap, r, 1<<16, 0, 0, 0, 0); got != 0 {
		t.Fatalf("munmap returned %d", got)
	}
}

// TestFastCallSetCurrent checks the context step: the call runs only when
// the set-current function returns 0, and its failure code is returned.
func TestFastCallSetCurrent(t *testing.T) {
	memset := libcSym(t, "memset")
	buf := make([]byte, 64)
	p := uintptr(unsafe.Pointer(&buf[0]))

	// isatty(12345) returns 0: "context set", so memset runs.
	withSetCurrent(t, libcSym(t, "isatty"))
	if r := fastCall(12345, memset, p, 'x', 32, 0, 0, 0); r != Result(int32(uint32(p))) {
		t.Fatalf("fastCall returned %#x, want memset's %#x", r, uint32(p))
	}
	if !bytes.Equal(buf[:32], bytes.Repeat([]byte("x"), 32)) || buf[32] != 0 {
		t.Fatalf("memset did not run as asked: %q", buf)
	}
	// abs(7) returns 7: "failed", so memset must not run and 7 comes back.
	withSetCurrent(t, libcSym(t, "abs"))
	if r := fastCall(7, memset, p, 'y', 64, 0, 0, 0); r != 7 {
		t.Fatalf("fastCall returned %d, want 7", r)
	}
	if bytes.Contains(buf, []byte("y")) {
		t.Fatal("the call ran although setting the context failed")
	}
	runtime.KeepAlive(buf)
}

// TestFastCallConcurrent runs fastCall from many goroutines with the race
// detector watching.
func TestFastCallConcurrent(t *testing.T) {
	labs := libcSym(t, "labs")
	done := make(chan bool)
	for g := range 16 {
		go func() {
			ok := true
			for i := range 2000 {
				v := int64(-(g*10000 + i))
				if r := fastCallPtr(0, labs, uintptr(v), 0, 0, 0, 0, 0); r != uintptr(-v) {
					ok = false
				}
				if i%100 == 0 {
					runtime.Gosched()
				}
			}
			done <- ok
		}()
	}
	for range 16 {
		if !<-done {
			t.Error("labs through fastCall gave a wrong value")
		}
	}
}

func BenchmarkFastCall(b *testing.B) {
	labs := libcSym(b, "labs")
	withSetCurrent(b, libcSym(b, "labs")) // labs(0) == 0: a trivial "set current"
	b.Run("purego/labs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			invoke(labs, 5)
		}
	})
	b.Run("fastCall/labs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fastCall(0, labs, 5, 0, 0, 0, 0, 0)
		}
	})
	b.Run("fastCall/set+labs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fastCall(1<<63, labs, 5, 0, 0, 0, 0, 0) // labs(1<<63) is LONG_MIN, non-zero: skip
		}
	})
}
