package pinpool

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"unsafe"

	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/hostmem"
	"golang.org/x/sys/unix"
)

// testBackendEnv selects the memory behind the pool's tests: unset, plain
// anonymous mappings (fast, for CI); "host", locked host memory; "hostalloc"
// or "register", CUDA device 0 with that method (the GPU host runs the whole
// suite this way: scripts/gpu-run.sh). Whatever the memory, the tests see
// it through fakeBackend, which counts and checks every allocation.
const testBackendEnv = "PINPOOL_TEST_BACKEND"

var (
	innerOnce sync.Once
	inner     Backend
)

// innerBackend returns the real backend the tests run on, or nil for plain
// mappings. A backend named in the environment that cannot be made is a
// test failure, not a skip: the run asked for it.
func innerBackend() Backend {
	innerOnce.Do(func() {
		switch v := os.Getenv(testBackendEnv); v {
		case "":
		case "host":
			inner = NewHostBackend(hostmem.Options{})
		case "hostalloc", "register":
			m := cudahost.HostAlloc
			if v == "register" {
				m = cudahost.Register
			}
			b, err := cudahost.New(cudahost.Options{Method: m})
			if err != nil {
				panic(fmt.Sprintf("%s=%s: %v", testBackendEnv, v, err))
			}
			inner = CUDABackend(b)
		default:
			panic(fmt.Sprintf("%s=%q: want host, hostalloc or register", testBackendEnv, v))
		}
	})
	return inner
}

// fakeBackend wraps the test memory (see testBackendEnv) and counts
// everything, for testing the pool's logic. failEvery > 0 makes every
// failEvery-th Alloc fail. mapped pretends the memory is mapped into a
// device (plain mappings only).
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
	inner     Backend
}

var errInjected = errors.New("injected allocation failure")

func newFake() *fakeBackend { return &fakeBackend{live: map[uintptr]int{}, inner: innerBackend()} }

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
	a := &fakeAlloc{f: f}
	if f.inner != nil {
		in, err := f.inner.Alloc(size)
		if err != nil {
			return nil, err
		}
		a.in, a.m = in, in.Bytes()
	} else {
		m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			return nil, err
		}
		a.m = m
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allocs++
	f.live[uintptr(unsafe.Pointer(&a.m[0]))] = size
	f.liveBytes += int64(size)
	f.maxLive = max(f.maxLive, f.liveBytes)
	return a, nil
}

func (f *fakeBackend) stats() (liveBytes, maxLive int64, allocs, frees int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.liveBytes, f.maxLive, f.allocs, f.frees
}

type fakeAlloc struct {
	f     *fakeBackend
	m     []byte
	in    Allocation // the real allocation, or nil for a plain mapping
	freed bool
}

func (a *fakeAlloc) Bytes() []byte { return a.m }

func (a *fakeAlloc) DevicePointer() (uintptr, error) {
	if a.in != nil {
		return a.in.DevicePointer()
	}
	if !a.f.mapped {
		return 0, ErrNotMapped
	}
	return uintptr(unsafe.Pointer(&a.m[0])) + 1<<40, nil // a distinct "device" address
}

func (a *fakeAlloc) Free() error {
	f := a.f
	f.mu.Lock()
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
	f.mu.Unlock()
	if a.in != nil {
		return a.in.Free()
	}
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
