package pinpool

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatedBackend is the fake backend with a Free that waits for a gate:
// memory on its way back to the backend, as the janitor frees it.
type gatedBackend struct {
	*fakeBackend
	gate    chan struct{}
	waiting atomic.Int32
}

func (g *gatedBackend) Alloc(size int) (Allocation, error) {
	a, err := g.fakeBackend.Alloc(size)
	if err != nil {
		return nil, err
	}
	return gatedAlloc{a, g}, nil
}

type gatedAlloc struct {
	Allocation
	g *gatedBackend
}

func (a gatedAlloc) Free() error {
	a.g.waiting.Add(1)
	<-a.g.gate
	return a.Allocation.Free()
}

// TestFreeInFlightCountsOnlyUntilDone: memory another goroutine is giving
// back holds budget until its Free returns; TryGet waits for it instead of
// refusing, and Trim returns only once it is back. Before, a TryGet of the
// whole budget right after a trim failed while the janitor was still
// freeing (seen on the 32-core host in TestAdvBudgetNotLeakedUnderFaults).
func TestFreeInFlightCountsOnlyUntilDone(t *testing.T) {
	gb := &gatedBackend{fakeBackend: newFake(), gate: make(chan struct{})}
	p, err := New(Options{Backend: gb, Exact: true, Budget: 4 << 20, GrowCount: 1, MinAvailable: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var open sync.Once
	openGate := func() { open.Do(func() { close(gb.gate) }) }
	defer openGate() // before Close, which waits for the free
	mustGet(t, p, 4<<20).Release()
	trimmed := make(chan struct{})
	go func() { p.Trim(); close(trimmed) }() // a free under way elsewhere
	waitFor(t, "the free to start", func() bool { return gb.waiting.Load() == 1 })

	got := make(chan error, 1)
	go func() {
		b, err := p.TryGet(4 << 20)
		if err == nil {
			b.Release()
		}
		got <- err
	}()
	trimDone := make(chan struct{})
	go func() { p.Trim(); close(trimDone) }()
	select {
	case err := <-got:
		t.Fatalf("TryGet returned %v while the only chunk was being freed; want it to wait for the free", err)
	case <-trimDone:
		t.Fatal("Trim returned while a free it did not start was under way")
	case <-time.After(50 * time.Millisecond):
	}
	openGate()
	if err := <-got; err != nil {
		t.Fatalf("TryGet after the free: %v", err)
	}
	<-trimmed
	<-trimDone
}
