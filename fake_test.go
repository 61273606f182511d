package pinpool

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fakeBackend hands out anonymous mappings (page-aligned, not locked, so
// fast) and counts everything, for testing the pool's logic. failEvery > 0
// makes every failEvery-th Alloc fail.
type fakeBackend struct {
	mu        sync.Mutex
	live      map[uintptr]int
	liveBytes int64
	maxLive   int64
	allocs    int
	frees     int
	failEvery int
	calls     int
	mapped    bool
}

var errInjected = errors.New("injected allocation failure")

func newFake() *fakeBackend { return &fakeBackend{live: map[uintptr]int{}} }

func (f *fakeBackend) Name() string { return "fake" }

func (f *fakeBackend) Alloc(size int) (Allocation, error) {
	if size <= 0 || size%pageSize != 0 {
		return nil, fmt.Errorf("fake: bad size %d", size)
	}
	f.mu.Lock()
	f.calls++
	fail := f.failEvery > 0 && f.calls%f.failEvery == 0
	f.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allocs++
	f.live[uintptr(unsafe.Pointer(&m[0]))] = size
	f.liveBytes += int64(size)
	f.maxLive = max(f.maxLive, f.liveBytes)
	return &fakeAlloc{f: f, m: m}, nil
}

func (f *fakeBackend) stats() (liveBytes, maxLive int64, allocs, frees int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.liveBytes, f.maxLive, f.allocs, f.frees
}

type fakeAlloc struct {
	f     *fakeBackend
	m     []byte
	freed bool
}

func (a *fakeAlloc) Bytes() []byte { return a.m }

func (a *fakeAlloc) DevicePointer() (uintptr, error) {
	if !a.f.mapped {
		return 0, ErrNotMapped
	}
	return uintptr(unsafe.Pointer(&a.m[0])) + 1<<40, nil // a distinct "device" address
}

func (a *fakeAlloc) Free() error {
	f := a.f
	f.mu.Lock()
	defer f.mu.Unlock()
	p := uintptr(unsafe.Pointer(&a.m[0]))
	if a.freed {
		panic("fake: double free")
	}
	if _, ok := f.live[p]; !ok {
		panic("fake: free of unknown memory")
	}
	a.freed = true
	delete(f.live, p)
	f.liveBytes -= int64(len(a.m))
	f.frees++
	return unix.Munmap(a.m)
}

// newTestPool makes a pool on a fake backend and checks at cleanup that
// after Close nothing is left allocated.
func newTestPool(t testing.TB, o Options) (*Pool, *fakeBackend) {
	t.Helper()
	f := newFake()
	if o.Backend == nil {
		o.Backend = f
	}
	if o.MinAvailable == 0 {
		o.MinAvailable = -1
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		if live, _, _, _ := f.stats(); live != 0 && o.Backend == Backend(f) {
			t.Errorf("after Close the backend still holds %d bytes", live)
		}
	})
	return p, f
}
