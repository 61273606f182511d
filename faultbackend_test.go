package pinpool

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultBackend wraps a fakeBackend (which counts and checks every
// allocation) and injects faults, each switchable at any time:
//
//   - failEvery: every Nth Alloc returns errFaultAlloc;
//   - panicEvery: every Nth Alloc panics (a string containing faultPanicMsg);
//   - shortBy: Bytes() of new allocations is this many bytes short (-1: nil);
//   - misalign: Bytes() of new allocations starts 8 bytes in (short and
//     not page-aligned);
//   - freeErrEvery: every Nth Free returns errFaultFree and frees nothing;
//   - freePanicEvery: every Nth Free panics and frees nothing;
//   - allocDelay: every Alloc sleeps this long first.
//
// It also records what the pool must never do: ask for a size that is not
// a positive multiple of 4096, or free an allocation twice. An allocation
// whose Free failed stays allocated in the fake (it is "leaked" on
// purpose); freeLeaked gives it back at the end of a test.
type faultBackend struct {
	fake *fakeBackend

	failEvery      atomic.Int64
	panicEvery     atomic.Int64
	shortBy        atomic.Int64
	misalign       atomic.Bool
	freeErrEvery   atomic.Int64
	freePanicEvery atomic.Int64
	allocDelay     atomic.Int64 // nanoseconds

	nameCalls   atomic.Int64
	allocCalls  atomic.Int64
	freeCalls   atomic.Int64
	fails       atomic.Int64 // injected Alloc errors
	panics      atomic.Int64 // injected Alloc panics
	freeFaults  atomic.Int64 // injected Free errors and panics
	freePanics  atomic.Int64 // injected Free panics
	doubleFrees atomic.Int64

	mu          sync.Mutex
	badSizes    []int
	leaked      []Allocation // inner allocations whose Free was made to fail
	leakedBytes int64
}

const faultPanicMsg = "faultBackend: injected panic"

var (
	errFaultAlloc = errors.New("faultBackend: injected allocation failure")
	errFaultFree  = errors.New("faultBackend: injected free failure")
)

func newFaultBackend() *faultBackend { return &faultBackend{fake: newFake()} }

func (b *faultBackend) Name() string {
	b.nameCalls.Add(1)
	return "fault(fake)"
}

func (b *faultBackend) Alloc(size int) (Allocation, error) {
	n := b.allocCalls.Add(1)
	if size <= 0 || size%pageSize != 0 {
		b.mu.Lock()
		b.badSizes = append(b.badSizes, size)
		b.mu.Unlock()
		return nil, fmt.Errorf("faultBackend: bad size %d", size)
	}
	if d := b.allocDelay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if e := b.panicEvery.Load(); e > 0 && n%e == 0 {
		b.panics.Add(1)
		panic(fmt.Sprintf("%s (Alloc #%d of %d bytes)", faultPanicMsg, n, size))
	}
	if e := b.failEvery.Load(); e > 0 && n%e == 0 {
		b.fails.Add(1)
		return nil, errFaultAlloc
	}
	in, err := b.fake.Alloc(size)
	if err != nil {
		return nil, err
	}
	return &faultAlloc{b: b, in: in, size: size, shortBy: int(b.shortBy.Load()), misalign: b.misalign.Load()}, nil
}

// stats returns the fake's figures: bytes live now (including what was
// leaked on purpose), the peak, allocations and frees done.
func (b *faultBackend) stats() (liveBytes, maxLive int64, allocs, frees int) { return b.fake.stats() }

func (b *faultBackend) leakedNow() (n int, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.leaked), b.leakedBytes
}

// freeLeaked frees, for real, the allocations whose Free was made to fail.
func (b *faultBackend) freeLeaked() {
	b.mu.Lock()
	l := b.leaked
	b.leaked, b.leakedBytes = nil, 0
	b.mu.Unlock()
	for _, a := range l {
		a.Free()
	}
}

type faultAlloc struct {
	b        *faultBackend
	in       Allocation
	size     int
	shortBy  int
	misalign bool
	called   atomic.Bool
}

func (a *faultAlloc) Bytes() []byte {
	m := a.in.Bytes()
	switch {
	case a.shortBy < 0:
		return nil
	case a.shortBy > 0:
		return m[:len(m)-min(a.shortBy, len(m))]
	case a.misalign:
		return m[8:]
	}
	return m
}

func (a *faultAlloc) DevicePointer() (uintptr, error) { return a.in.DevicePointer() }

func (a *faultAlloc) Free() error {
	b := a.b
	if !a.called.CompareAndSwap(false, true) {
		b.doubleFrees.Add(1)
		return errors.New("faultBackend: double free")
	}
	n := b.freeCalls.Add(1)
	leak := func() {
		b.freeFaults.Add(1)
		b.mu.Lock()
		b.leaked = append(b.leaked, a.in)
		b.leakedBytes += int64(a.size)
		b.mu.Unlock()
	}
	if e := b.freePanicEvery.Load(); e > 0 && n%e == 0 {
		leak()
		b.freePanics.Add(1)
		panic(fmt.Sprintf("%s in Free #%d", faultPanicMsg, n))
	}
	if e := b.freeErrEvery.Load(); e > 0 && n%e == 0 {
		leak()
		return errFaultFree
	}
	return a.in.Free()
}

// check reports what the pool must never do to a backend.
func (b *faultBackend) check(t testing.TB) {
	t.Helper()
	b.mu.Lock()
	bad := append([]int(nil), b.badSizes...)
	b.mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("the pool asked the backend for sizes that are not positive multiples of %d: %v", pageSize, bad)
	}
	if d := b.doubleFrees.Load(); d > 0 {
		t.Errorf("the pool freed %d allocations twice", d)
	}
}

// waitReleased waits (bounded) until the backend holds nothing but what
// was leaked on purpose, and reports an error if it does not.
func (b *faultBackend) waitReleased(t testing.TB, what string) bool {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		live, _, allocs, frees := b.stats()
		nLeaked, leaked := b.leakedNow()
		if live == leaked && allocs-frees == nLeaked {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: the backend still holds %d bytes (%d allocations, %d frees; %d bytes in %d allocations leaked on purpose)",
				what, live, allocs, frees, leaked, nLeaked)
			return false
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// newFaultPool makes a pool on a fresh faultBackend (MinAvailable -1 unless
// set). At cleanup it closes the pool (bounded), checks that the backend
// holds nothing but what was leaked on purpose and was never misused, and
// frees the leaked allocations.
func newFaultPool(t testing.TB, o Options) (*Pool, *faultBackend) {
	t.Helper()
	p, fb := newFaultPoolNoCleanup(t, o)
	t.Cleanup(func() {
		if !within(t, 10*time.Second, "Close at cleanup", func() { p.Close() }) {
			return
		}
		fb.waitReleased(t, "after Close at cleanup")
		fb.check(t)
		fb.freeLeaked()
	})
	return p, fb
}

// within runs f on its own goroutine and reports an error (with every
// goroutine's stack) if it does not return within d, so that a hang fails
// the test instead of stalling the run. It returns whether f returned.
func within(t testing.TB, d time.Duration, what string, f func()) bool {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		if len(buf) > 64<<10 {
			buf = buf[:64<<10]
		}
		t.Errorf("%s did not return within %v (hung). Goroutines:\n%s", what, d, buf)
		return false
	}
}

// mustWithin is within that stops the test on a hang.
func mustWithin(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	if !within(t, d, what, f) {
		t.FailNow()
	}
}

// closeWithin closes p, failing the test if Close hangs.
func closeWithin(t testing.TB, p *Pool, d time.Duration) error {
	t.Helper()
	var err error
	mustWithin(t, d, "Close", func() { err = p.Close() })
	return err
}

// waitUntil polls cond for at most d, and reports whether it came true.
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Microsecond)
	}
	return true
}
