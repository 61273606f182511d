package pinpool

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// flagFence is a fence a test completes or fails by hand.
type flagFence struct {
	done atomic.Bool
	err  atomic.Pointer[error]
}

func (f *flagFence) Done() (bool, error) {
	if e := f.err.Load(); e != nil {
		return false, *e
	}
	return f.done.Load(), nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestReleaseAfterFence(t *testing.T) {
	p, f := newTestPool(t, Options{GrowCount: 1, SlabMax: -1})
	b := mustGet(t, p, frame)
	mem := b.Pointer()
	var fence flagFence
	if err := b.ReleaseAfter(&fence); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(); !errors.Is(err, ErrReleased) {
		t.Fatalf("Release after ReleaseAfter: %v", err)
	}
	if st := p.Stats(); st.BytesPending == 0 || st.BytesIdle != 0 {
		t.Fatalf("pending buffer not counted: %+v", st)
	}
	// While the fence is not done the memory must not be handed out.
	c := mustGet(t, p, frame)
	if c.Pointer() == mem {
		t.Fatal("memory handed out before its fence completed")
	}
	fence.done.Store(true)
	waitFor(t, "the fenced buffer to come back", func() bool { return p.Stats().BytesPending == 0 })
	d := mustGet(t, p, frame)
	if d.Pointer() != mem {
		t.Fatalf("fenced memory not reused after completion")
	}
	c.Release()
	d.Release()
	if _, _, allocs, _ := f.stats(); allocs != 2 {
		t.Fatalf("%d allocations, want 2", allocs)
	}
	if st := p.Stats(); st.ReleasedAfterFence != 1 {
		t.Fatalf("ReleasedAfterFence = %d", st.ReleasedAfterFence)
	}
}

// TestFenceErrorRetires checks that a buffer whose fence fails is never
// handed out again and that its memory is freed.
func TestFenceErrorRetires(t *testing.T) {
	p, f := newTestPool(t, Options{GrowCount: 1, SlabMax: -1})
	b := mustGet(t, p, frame)
	mem := b.Pointer()
	var fence flagFence
	b.ReleaseAfter(&fence)
	e := errors.New("device lost")
	fence.err.Store(&e)
	waitFor(t, "the retired buffer to be freed", func() bool {
		live, _, _, _ := f.stats()
		return live == 0
	})
	for range 5 {
		c := mustGet(t, p, frame)
		if c.Pointer() == mem {
			// The address may be reused by a new mapping; the old slot may not.
			if c.s == b.s {
				t.Fatal("retired buffer handed out again")
			}
		}
		c.Release()
	}
	if st := p.Stats(); st.FenceErrors != 1 || st.BytesPending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestFenceErrorInSlab checks retirement inside a slab: the slab is freed
// only when its other buffers are idle.
func TestFenceErrorInSlab(t *testing.T) {
	p, f := newTestPool(t, Options{})
	a, b := mustGet(t, p, 4096), mustGet(t, p, 4096)
	var fence flagFence
	e := errors.New("boom")
	fence.err.Store(&e)
	a.ReleaseAfter(&fence)
	waitFor(t, "the fence error", func() bool { return p.Stats().FenceErrors == 1 })
	if live, _, _, _ := f.stats(); live == 0 {
		t.Fatal("slab freed while another buffer of it is in use")
	}
	b.Release()
	p.Trim()
	if live, _, _, _ := f.stats(); live != 0 {
		t.Fatalf("slab with a retired buffer not freed: %d bytes live", live)
	}
}

// TestPendingBlocksBudget checks that a Get waiting for room is served when
// a fence completes.
func TestPendingBlocksBudget(t *testing.T) {
	p, _ := newTestPool(t, Options{Budget: 4 << 20, SlabMax: -1, GrowCount: 1})
	b := mustGet(t, p, 4<<20)
	var fence flagFence
	b.ReleaseAfter(&fence)
	if _, err := p.TryGet(4 << 20); !errors.Is(err, ErrBudget) {
		t.Fatalf("TryGet while the only buffer is pending: %v", err)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		fence.done.Store(true)
	}()
	c, err := p.Get(t.Context(), 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	c.Release()
}

// TestReleaseAfterFenceAfterClose checks that a buffer released with a
// fence after Close (and after the janitor finished) is still freed once
// its fence completes.
func TestReleaseAfterFenceAfterClose(t *testing.T) {
	f := newFake()
	p, err := New(Options{Backend: f, MinAvailable: -1})
	if err != nil {
		t.Fatal(err)
	}
	b := mustGet(t, p, frame)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	<-p.jan.done // the janitor has exited
	var fence flagFence
	if err := b.ReleaseAfter(&fence); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if live, _, _, _ := f.stats(); live == 0 {
		t.Fatal("freed before the fence completed")
	}
	fence.done.Store(true)
	waitFor(t, "the late fenced buffer to be freed", func() bool {
		live, _, _, _ := f.stats()
		return live == 0
	})
}
