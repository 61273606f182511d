package pinpool

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// faultyBackend wraps the counting fakeBackend and misbehaves on demand, as
// a driver or a user's backend might: it fails or panics in Alloc every
// Nth call, returns memory that is short or not page-aligned, fails or
// panics in Free, or is slow. Every setting can change while the pool
// runs. Allocations it hands out are the fake's, so the fake's counts
// still tell what is live.
type faultyBackend struct {
	fake *fakeBackend

	failEvery  atomic.Int64 // Alloc returns errFaulty every Nth call
	panicEvery atomic.Int64 // Alloc panics every Nth call
	short      atomic.Bool  // Bytes() is one page short
	misalign   atomic.Bool  // Bytes() starts one byte into the memory
	freeFail   atomic.Bool  // Free frees the memory but returns errFaulty
	freePanic  atomic.Bool  // Free panics without freeing
	slow       atomic.Int64 // Alloc sleeps this many nanoseconds first

	calls atomic.Int64
}

var errFaulty = errors.New("injected backend fault")

func newFaultyBackend() *faultyBackend { return &faultyBackend{fake: newFake()} }

func (b *faultyBackend) Name() string { return "faulty" }

func (b *faultyBackend) Alloc(size int) (Allocation, error) {
	n := b.calls.Add(1)
	if d := b.slow.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if k := b.panicEvery.Load(); k > 0 && n%k == 0 {
		panic(fmt.Sprintf("faulty: Alloc(%d) call %d panics", size, n))
	}
	if k := b.failEvery.Load(); k > 0 && n%k == 0 {
		return nil, errFaulty
	}
	a, err := b.fake.Alloc(size)
	if err != nil {
		return nil, err
	}
	return &faultyAlloc{Allocation: a, b: b, short: b.short.Load(), misalign: b.misalign.Load()}, nil
}

// live is what the fake backend still holds.
func (b *faultyBackend) live() int64 {
	l, _, _, _ := b.fake.stats()
	return l
}

type faultyAlloc struct {
	Allocation
	b               *faultyBackend
	short, misalign bool
}

func (a *faultyAlloc) Bytes() []byte {
	m := a.Allocation.Bytes()
	switch {
	case a.short:
		return m[:len(m)-pageSize]
	case a.misalign:
		return m[1:]
	}
	return m
}

func (a *faultyAlloc) Free() error {
	if a.b.freePanic.Load() {
		panic("faulty: Free panics")
	}
	if err := a.Allocation.Free(); err != nil {
		return err
	}
	if a.b.freeFail.Load() {
		return errFaulty
	}
	return nil
}

// sizeCheckingBackend records every Alloc size that breaks the Backend
// contract (a positive multiple of 4096), for the options fuzzer.
type sizeCheckingBackend struct {
	*fakeBackend
	mu  sync.Mutex
	bad []int
}

func (s *sizeCheckingBackend) Alloc(size int) (Allocation, error) {
	if size <= 0 || size%pageSize != 0 {
		s.mu.Lock()
		s.bad = append(s.bad, size)
		s.mu.Unlock()
	}
	return s.fakeBackend.Alloc(size)
}
