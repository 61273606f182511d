package seedpool

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// FakeAllocator is an Allocator backed by the Go heap, for tests and for
// benchmarks that measure the pool rather than the memory. It counts calls
// and live bytes, can inject failures and latency, and detects double frees
// and frees of memory it did not hand out.
//
// Set FailEvery and Latency before the first call; the zero value is ready
// to use.
type FakeAllocator struct {
	// FailEvery, when positive, makes every FailEvery-th call to Alloc
	// (the FailEvery-th, 2*FailEvery-th, ...) fail with ErrInjected.
	FailEvery int64
	// Latency, when positive, is slept at the start of every Alloc call,
	// to mimic the ~1 ms of cudaHostAlloc. It is a sleep, not a busy wait:
	// the calling goroutine blocks but its CPU is given up.
	Latency time.Duration

	allocCalls atomic.Int64
	freeCalls  atomic.Int64
	failures   atomic.Int64
	liveBytes  atomic.Int64

	mu    sync.Mutex
	live  map[uintptr][]byte   // first byte -> allocation; keeps it reachable
	freed map[uintptr]struct{} // first bytes of freed allocations, until reused
}

// Alloc implements Allocator with a zeroed Go slice of exactly size bytes.
func (f *FakeAllocator) Alloc(size int) ([]byte, error) {
	if f.Latency > 0 {
		time.Sleep(f.Latency)
	}
	n := f.allocCalls.Add(1)
	if size <= 0 {
		f.failures.Add(1)
		return nil, ErrInvalidSize
	}
	if f.FailEvery > 0 && n%f.FailEvery == 0 {
		f.failures.Add(1)
		return nil, ErrInjected
	}
	b := make([]byte, size)
	key := uintptr(unsafe.Pointer(&b[0]))
	f.mu.Lock()
	if f.live == nil {
		f.live = make(map[uintptr][]byte)
		f.freed = make(map[uintptr]struct{})
	}
	f.live[key] = b
	delete(f.freed, key) // the address was reused by the Go heap
	f.mu.Unlock()
	f.liveBytes.Add(int64(size))
	return b, nil
}

// Free implements Allocator. It returns ErrDoubleFree for an allocation that
// was already freed and ErrUnknown for memory it never handed out (including
// a slice that does not start at an allocation's first byte).
func (f *FakeAllocator) Free(b []byte) error {
	f.freeCalls.Add(1)
	if cap(b) == 0 {
		return ErrUnknown
	}
	key := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	f.mu.Lock()
	a, ok := f.live[key]
	if ok {
		delete(f.live, key)
		f.freed[key] = struct{}{}
	} else if _, was := f.freed[key]; was {
		f.mu.Unlock()
		return ErrDoubleFree
	}
	f.mu.Unlock()
	if !ok {
		return ErrUnknown
	}
	f.liveBytes.Add(-int64(len(a)))
	return nil
}

// AllocCalls returns the number of calls to Alloc, failed ones included.
func (f *FakeAllocator) AllocCalls() int64 { return f.allocCalls.Load() }

// FreeCalls returns the number of calls to Free, failed ones included.
func (f *FakeAllocator) FreeCalls() int64 { return f.freeCalls.Load() }

// Failures returns the number of Alloc calls that returned an error.
func (f *FakeAllocator) Failures() int64 { return f.failures.Load() }

// LiveBytes returns the bytes allocated and not yet freed.
func (f *FakeAllocator) LiveBytes() int64 { return f.liveBytes.Load() }

// LiveBlocks returns the number of allocations not yet freed.
func (f *FakeAllocator) LiveBlocks() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}
