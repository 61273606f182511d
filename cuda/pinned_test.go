package cuda

import (
	"sync"
	"testing"
)

func resetPinned(t *testing.T) {
	t.Helper()
	old := pinned.spans.Load()
	pinned.spans.Store(nil)
	t.Cleanup(func() { pinned.spans.Store(old) })
}

func TestPinnedRegistry(t *testing.T) {
	resetPinned(t)
	addPinned(0x10000, 0x1000)
	addPinned(0x30000, 0x2000)
	addPinned(0x20000, 0x1000)
	tests := []struct {
		p, n uintptr
		want bool
	}{
		{0x10000, 1, true},
		{0x10000, 0x1000, true},
		{0x10000, 0x1001, false}, // runs past the end
		{0x10fff, 1, true},
		{0x11000, 1, false}, // just after
		{0xffff, 2, false},  // starts before
		{0x20800, 0x800, true},
		{0x30000, 0x2000, true},
		{0x31fff, 2, false},
		{0x0, 1, false},
		{^uintptr(0) - 1, 4, false}, // wraps around
		{0x10000, ^uintptr(0), false},
	}
	for _, tt := range tests {
		if got := knownPinned(tt.p, tt.n); got != tt.want {
			t.Errorf("knownPinned(%#x, %#x) = %v, want %v", tt.p, tt.n, got, tt.want)
		}
	}
	removePinned(0x20000)
	if knownPinned(0x20000, 1) {
		t.Error("removed span still known")
	}
	if !knownPinned(0x30000, 1) || !knownPinned(0x10000, 1) {
		t.Error("removing one span lost another")
	}
	removePinned(0x99999) // unknown: no effect
	if !knownPinned(0x30000, 1) {
		t.Error("removing an unknown start changed the registry")
	}
}

func TestPinnedRegistryConcurrent(t *testing.T) {
	resetPinned(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			base := uintptr(g+1) << 32
			for i := range 200 {
				p := base + uintptr(i)<<16
				addPinned(p, 4096)
				if !knownPinned(p+100, 100) {
					t.Errorf("span %#x not found after add", p)
					return
				}
				removePinned(p)
				if knownPinned(p, 1) {
					t.Errorf("span %#x found after remove", p)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCheckPinnedRefusesGoMemory(t *testing.T) {
	resetPinned(t)
	b := make([]byte, 4096)
	if err := checkPinned(b); err == nil {
		t.Fatal("a Go slice passed the pinned check")
	}
	if err := checkPinned(nil); err != nil {
		t.Fatalf("empty slice: %v", err)
	}
}

func BenchmarkKnownPinned(b *testing.B) {
	old := pinned.spans.Load()
	defer pinned.spans.Store(old)
	pinned.spans.Store(nil)
	for i := range 1024 {
		addPinned(uintptr(i+1)<<24, 1<<20)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if !knownPinned(uintptr(i%1024+1)<<24+4096, 4096) {
			b.Fatal("not found")
		}
	}
}
