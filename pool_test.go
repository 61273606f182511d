package pinpool

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pinpool/pinpool/hostmem"
	"github.com/pinpool/pinpool/internal/sizeclass"
)

const frame = 1920 * 1080 * 3 / 2 // 3,110,400 bytes: a 1080p NV12 frame

func mustGet(t testing.TB, p *Pool, n int) Buffer {
	t.Helper()
	b, err := p.TryGet(n)
	if err != nil {
		t.Fatalf("TryGet(%d): %v", n, err)
	}
	return b
}

func TestGetRelease(t *testing.T) {
	p, _ := newTestPool(t, Options{})
	for _, n := range []int{1, 100, 4096, 4097, 65536 + 1, 1 << 20, frame, 8<<20 + 3} {
		b := mustGet(t, p, n)
		if b.Len() != n || b.Cap() < n || len(b.Bytes()) != n {
			t.Fatalf("%d: Len %d Cap %d len(Bytes) %d", n, b.Len(), b.Cap(), len(b.Bytes()))
		}
		if uintptr(b.Pointer())%pageSize != 0 {
			t.Errorf("%d: pointer %p not page-aligned", n, b.Pointer())
		}
		if n > 32<<10 && b.Cap()-n > n/8 {
			t.Errorf("%d: capacity %d wastes more than 12.5%%", n, b.Cap())
		}
		bs := b.Bytes()
		bs[0], bs[n-1] = 1, 2
		if !b.Valid() {
			t.Fatal("fresh buffer not valid")
		}
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
		if err := b.Release(); !errors.Is(err, ErrReleased) {
			t.Fatalf("second Release: %v", err)
		}
		if b.Bytes() != nil || b.Pointer() != nil || b.Valid() {
			t.Fatal("dead handle still gives memory")
		}
	}
}

// TestStaleHandleAfterReuse checks the generation: a handle released once
// cannot release the memory again after the pool handed it out anew.
func TestStaleHandleAfterReuse(t *testing.T) {
	p, _ := newTestPool(t, Options{})
	a := mustGet(t, p, frame)
	ptr := a.Pointer()
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	b := mustGet(t, p, frame)
	if b.Pointer() != ptr {
		t.Fatalf("memory not reused: %p then %p", ptr, b.Pointer())
	}
	if err := a.Release(); !errors.Is(err, ErrReleased) {
		t.Fatalf("stale Release: %v", err)
	}
	if a.Bytes() != nil {
		t.Fatal("stale handle reads the new owner's memory")
	}
	if !b.Valid() {
		t.Fatal("the stale release hurt the new owner")
	}
	if err := a.ReleaseAfter(FenceFunc(func() (bool, error) { return true, nil })); !errors.Is(err, ErrReleased) {
		t.Fatalf("stale ReleaseAfter: %v", err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	var zero Buffer
	if err := zero.Release(); !errors.Is(err, ErrReleased) {
		t.Fatalf("zero Buffer Release: %v", err)
	}
	if zero.Cap() != 0 || zero.Bytes() != nil {
		t.Fatal("zero Buffer has memory")
	}
}

func TestInvalidSizes(t *testing.T) {
	p, _ := newTestPool(t, Options{})
	for _, n := range []int{0, -1, -1 << 40, int(MaxSize) + 1} {
		if _, err := p.TryGet(n); !errors.Is(err, ErrInvalidSize) {
			t.Errorf("TryGet(%d): %v", n, err)
		}
		if _, err := p.Get(context.Background(), n); !errors.Is(err, ErrInvalidSize) {
			t.Errorf("Get(%d): %v", n, err)
		}
		if err := p.Reserve(n, 1); !errors.Is(err, ErrInvalidSize) {
			t.Errorf("Reserve(%d): %v", n, err)
		}
	}
	if err := p.Reserve(4096, -1); !errors.Is(err, ErrInvalidSize) {
		t.Errorf("Reserve(count -1): %v", err)
	}
	if _, err := New(Options{Backend: newFake(), Budget: -1}); err == nil {
		t.Error("negative budget accepted")
	}
}

func TestForeign(t *testing.T) {
	p1, _ := newTestPool(t, Options{})
	p2, _ := newTestPool(t, Options{})
	b := mustGet(t, p1, 4096)
	if err := p2.Release(b); !errors.Is(err, ErrForeign) {
		t.Fatalf("foreign Release: %v", err)
	}
	if p2.Owns(b) || !p1.Owns(b) {
		t.Fatal("Owns is wrong")
	}
	if err := p1.Release(b); err != nil {
		t.Fatal(err)
	}
}

func TestClose(t *testing.T) {
	f := newFake()
	p, err := New(Options{Backend: f, MinAvailable: -1})
	if err != nil {
		t.Fatal(err)
	}
	out := mustGet(t, p, frame)
	idle := mustGet(t, p, 4096)
	idle.Release()
	fenced := mustGet(t, p, 64<<10)
	var fenceDone sync.Mutex
	fenceDone.Lock()
	done := false
	fenced.ReleaseAfter(FenceFunc(func() (bool, error) {
		fenceDone.Lock()
		defer fenceDone.Unlock()
		return done, nil
	}))
	fenceDone.Unlock()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := p.TryGet(4096); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryGet after Close: %v", err)
	}
	if _, err := p.Get(context.Background(), 4096); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := p.Reserve(4096, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reserve after Close: %v", err)
	}
	if live, _, _, _ := f.stats(); live == 0 {
		t.Fatal("Close freed memory still in use")
	}
	// The buffer still out stays usable, then is freed on release.
	out.Bytes()[frame-1] = 7
	if err := out.Release(); err != nil {
		t.Fatal(err)
	}
	fenceDone.Lock()
	done = true
	fenceDone.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		live, _, allocs, frees := f.stats()
		if live == 0 {
			if allocs != frees {
				t.Fatalf("%d allocations, %d frees", allocs, frees)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Close and the last release the backend holds %d bytes", live)
		}
		time.Sleep(time.Millisecond)
	}
	if st := p.Stats(); st.BytesHeld != 0 {
		t.Fatalf("Stats after Close: %+v", st)
	}
}

func TestBudget(t *testing.T) {
	const n = 1 << 20 // slab class: 4 per 4 MiB slab
	p, f := newTestPool(t, Options{Budget: 4 << 20, SlabMax: -1, GrowCount: 1})
	var bufs []Buffer
	for range 4 {
		bufs = append(bufs, mustGet(t, p, n))
	}
	if _, err := p.TryGet(n); !errors.Is(err, ErrBudget) {
		t.Fatalf("TryGet over budget: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := p.Get(ctx, n); !errors.Is(err, ErrBudget) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get over budget: %v", err)
	}
	// A blocked Get is woken by a release.
	got := make(chan error, 1)
	go func() {
		b, err := p.Get(context.Background(), n)
		if err == nil {
			err = b.Release()
		}
		got <- err
	}()
	time.Sleep(10 * time.Millisecond)
	select {
	case err := <-got:
		t.Fatalf("Get did not block: %v", err)
	default:
	}
	bufs[0].Release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blocked Get not woken by a release")
	}
	for _, b := range bufs[1:] {
		b.Release()
	}
	if _, maxLive, _, _ := f.stats(); maxLive > 4<<20 {
		t.Fatalf("backend held %d bytes, over the budget", maxLive)
	}
	if st := p.Stats(); st.PeakHeld > 4<<20 || st.BudgetWaits == 0 || st.BudgetRefusals == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBudgetTrimsOtherSizes fills the budget with idle buffers of one size
// and then asks for another size: the idle memory is freed to make room.
func TestBudgetTrimsOtherSizes(t *testing.T) {
	p, f := newTestPool(t, Options{Budget: 8 << 20, SlabMax: -1})
	var bufs []Buffer
	for range 4 {
		bufs = append(bufs, mustGet(t, p, 2<<20))
	}
	for _, b := range bufs {
		b.Release()
	}
	b, err := p.TryGet(6 << 20)
	if err != nil {
		t.Fatalf("TryGet with only idle memory in the way: %v", err)
	}
	b.Release()
	if _, maxLive, _, _ := f.stats(); maxLive > 8<<20 {
		t.Fatalf("backend held %d bytes, over the budget", maxLive)
	}
}

func TestGrowBatches(t *testing.T) {
	p, f := newTestPool(t, Options{})
	var held []Buffer
	defer func() {
		for _, x := range held {
			x.Release()
		}
	}()
	get := func(n int) {
		t.Helper()
		held = append(held, mustGet(t, p, n))
	}
	// A large class grows by GrowCount buffers in one allocation.
	get(frame)
	if _, live, allocs, _ := f.stats(); allocs != 1 || live != 4*int64(p.Stats().Classes[0].Size) {
		t.Fatalf("a large miss: %d allocations of %d bytes, want one of 4 buffers (GrowCount)", allocs, live)
	}
	for range 3 {
		get(frame)
	}
	if _, _, allocs, _ := f.stats(); allocs != 1 {
		t.Fatalf("3 more Gets allocated: %d allocations", allocs)
	}
	// GrowBytes bounds the batch: 64 MiB / 24 MiB = 2 buffers.
	get(24 << 20)
	if _, live, allocs, _ := f.stats(); allocs != 2 || live != 4*int64(p.Stats().Classes[0].Size)+2*(24<<20) {
		t.Fatalf("24 MiB miss: %d allocations, %d bytes live; want one more of 2 buffers", allocs, live)
	}
	// Small sizes come many to one slab.
	for range 100 {
		get(4096)
	}
	if _, _, allocs, _ := f.stats(); allocs != 3 {
		t.Fatalf("100 small buffers: %d allocations, want one slab more", allocs)
	}
	st := p.Stats()
	if st.Misses != 3 || st.Grows != 3 {
		t.Fatalf("misses %d grows %d", st.Misses, st.Grows)
	}
}

// TestGrowFallsBackToOne: when the budget cannot hold a whole batch, a
// large class grows by one buffer.
func TestGrowFallsBackToOne(t *testing.T) {
	p, f := newTestPool(t, Options{Exact: true, Budget: 8 << 20})
	b := mustGet(t, p, 3<<20)
	defer b.Release()
	if _, live, allocs, _ := f.stats(); allocs != 1 || live != 3<<20 {
		t.Fatalf("%d allocations, %d bytes; want one buffer of 3 MiB", allocs, live)
	}
}

func TestFaultInjection(t *testing.T) {
	p, f := newTestPool(t, Options{GrowCount: 1, MaxIdle: -1})
	f.failEvery = 3
	var bufs []Buffer
	var failures int
	for i := range 60 {
		n := []int{4096, 1 << 20, frame, 5 << 20}[i%4] * (1 + i%3)
		b, err := p.TryGet(n)
		if err != nil {
			if !errors.Is(err, ErrGrow) || !errors.Is(err, errInjected) {
				t.Fatalf("failure is not typed: %v", err)
			}
			failures++
			continue
		}
		b.Bytes()[0] = byte(i)
		bufs = append(bufs, b)
	}
	if failures == 0 || len(bufs) == 0 {
		t.Fatalf("%d failures, %d buffers", failures, len(bufs))
	}
	if calls := f.calls; calls > 2*60 {
		t.Fatalf("%d backend calls for 60 requests: more than one retry (with the smallest allocation) each", calls)
	}
	for _, b := range bufs {
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
	}
	st := p.Stats()
	if injected := f.calls / f.failEvery; st.Failures != uint64(injected) || st.BytesInUse != 0 {
		t.Fatalf("stats %+v after %d injected allocation failures (%d failed Gets)", st, injected, failures)
	}
}

func TestTrim(t *testing.T) {
	p, f := newTestPool(t, Options{})
	var bufs []Buffer
	for _, n := range []int{4096, 65536, frame, frame} {
		bufs = append(bufs, mustGet(t, p, n))
	}
	keep := bufs[3]
	for _, b := range bufs[:3] {
		b.Release()
	}
	freed := p.Trim()
	live, _, _, _ := f.stats()
	if freed == 0 || live != keep.s.chunk.bytes {
		t.Fatalf("Trim freed %d, backend holds %d, want only the buffer in use (%d)", freed, live, keep.s.chunk.bytes)
	}
	keep.Release()
	if p.Trim() == 0 {
		t.Fatal("second Trim freed nothing")
	}
	if st := p.Stats(); st.BytesHeld != 0 || st.BytesIdle != 0 {
		t.Fatalf("after Trim: %+v", st)
	}
}

func TestMaxIdle(t *testing.T) {
	p, f := newTestPool(t, Options{MaxIdle: 5, GrowCount: 4, IdleDecay: 20 * time.Millisecond})
	var bufs []Buffer
	for range 20 {
		bufs = append(bufs, mustGet(t, p, frame))
	}
	for _, b := range bufs {
		b.Release()
	}
	size := p.Stats().Classes[0].Size
	waitFor(t, "idle buffers and their memory down to MaxIdle", func() bool {
		live, _, _, _ := f.stats()
		return p.Stats().Classes[0].Idle <= 5 && live <= 5*size
	})
}

func TestIdleTimeout(t *testing.T) {
	p, f := newTestPool(t, Options{IdleTimeout: 40 * time.Millisecond})
	b := mustGet(t, p, frame)
	b.Release()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if live, _, _, _ := f.stats(); live == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("idle memory not freed after IdleTimeout")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := p.Stats(); st.Trims == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestIdleTimeoutKeepsUsedMemory checks that memory in steady use is not
// freed by the idle timeout.
func TestIdleTimeoutKeepsUsedMemory(t *testing.T) {
	// The buffer is idle for nanoseconds between a release and the next
	// Get; the timeout is long against that even when the goroutine is
	// descheduled right after a release, as on a loaded machine, and the
	// load lasts four timeouts.
	p, f := newTestPool(t, Options{IdleTimeout: 250 * time.Millisecond})
	_, _, before, _ := f.stats()
	stop := time.Now().Add(time.Second)
	for time.Now().Before(stop) {
		b := mustGet(t, p, frame)
		time.Sleep(time.Millisecond)
		b.Release()
	}
	if _, _, allocs, frees := f.stats(); allocs-before > 4 || frees != allocs-4 && frees != 0 {
		t.Logf("allocations %d, frees %d", allocs, frees)
	}
	if st := p.Stats(); st.Misses != 1 {
		t.Fatalf("a buffer in steady use was freed and regrown: %d misses", st.Misses)
	}
}

func TestExactMode(t *testing.T) {
	p, _ := newTestPool(t, Options{Exact: true})
	b := mustGet(t, p, frame)
	if b.Cap() != 3112960 {
		t.Fatalf("exact capacity %d, want 3112960 (760 pages)", b.Cap())
	}
	c := mustGet(t, p, 4097)
	if c.Cap() != 8192 {
		t.Fatalf("exact capacity of 4097 bytes: %d", c.Cap())
	}
	b.Release()
	c.Release()
}

func TestDevicePointer(t *testing.T) {
	p, f := newTestPool(t, Options{})
	b := mustGet(t, p, 4096)
	if _, err := b.DevicePointer(); !errors.Is(err, ErrNotMapped) {
		t.Fatalf("unmapped DevicePointer: %v", err)
	}
	b.Release()
	p.Trim()
	if f.inner != nil {
		t.Skipf("pretending a mapping needs plain test memory (%s is set)", testBackendEnv)
	}
	f.mapped = true
	b1, b2 := mustGet(t, p, 4096), mustGet(t, p, 4096)
	d1, err1 := b1.DevicePointer()
	d2, err2 := b2.DevicePointer()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if d2-d1 != uintptr(b2.Pointer())-uintptr(b1.Pointer()) {
		t.Fatalf("device pointers %#x %#x do not follow host offsets", d1, d2)
	}
	b1.Release()
	if _, err := b1.DevicePointer(); !errors.Is(err, ErrReleased) {
		t.Fatalf("DevicePointer after release: %v", err)
	}
	b2.Release()
}

func TestDebugPoison(t *testing.T) {
	p, _ := newTestPool(t, Options{Debug: true})
	b := mustGet(t, p, 8192)
	stale := b.Bytes()
	b.Release()
	for _, x := range stale {
		if x != 0xDB {
			t.Fatalf("released memory not poisoned: %#x", x)
		}
	}
	stale[100] = 1 // use after release
	// The written buffer is one of the class's idle ones; which Get hands
	// it out depends on the P the goroutine runs on (per-P caches), so
	// take every idle buffer: one of those Gets must detect the write.
	var idle int64
	for _, cl := range p.Stats().Classes {
		idle += cl.Idle
	}
	var taken []Buffer
	defer func() {
		r := recover()
		for _, c := range taken {
			c.Release()
		}
		if r == nil && !t.Failed() { // a failed TryGet has reported already
			t.Fatalf("use after release not detected in %d Gets of the %d idle buffers", len(taken), idle)
		}
		t.Logf("detected: %v", r)
	}()
	for range idle {
		c, err := p.TryGet(8192)
		if err != nil {
			t.Fatal(err)
		}
		taken = append(taken, c)
	}
}

func TestStats(t *testing.T) {
	p, _ := newTestPool(t, Options{})
	for range 10 {
		b := mustGet(t, p, frame)
		b.Release()
	}
	st := p.Stats()
	if st.Gets != 10 || st.Hits != 9 || st.Misses != 1 || st.Grows != 1 {
		t.Fatalf("gets %d hits %d misses %d grows %d", st.Gets, st.Hits, st.Misses, st.Grows)
	}
	if st.Backend != "fake" || st.BytesHeld != 4*st.Classes[0].Size || st.BytesIdle != st.BytesHeld || st.BytesInUse != 0 {
		t.Fatalf("%+v", st)
	}
	if st.GrowTime <= 0 || st.MaxGrowTime <= 0 || st.BytesGrown != st.BytesHeld {
		t.Fatalf("grow timing %+v", st)
	}
	if s := p.String(); s == "" {
		t.Fatal("empty String")
	}
}

func TestReserve(t *testing.T) {
	p, f := newTestPool(t, Options{})
	if err := p.Reserve(frame, 10); err != nil {
		t.Fatal(err)
	}
	_, _, allocs, _ := f.stats()
	var bufs []Buffer
	for range 10 {
		bufs = append(bufs, mustGet(t, p, frame))
	}
	if _, _, a, _ := f.stats(); a != allocs {
		t.Fatalf("Gets after Reserve allocated %d more", a-allocs)
	}
	for _, b := range bufs {
		b.Release()
	}
	pb, _ := newTestPool(t, Options{Budget: 8 << 20})
	if err := pb.Reserve(frame, 10); !errors.Is(err, ErrBudget) {
		t.Fatalf("Reserve over budget: %v", err)
	}
}

func TestHostBackendCloseUnlocks(t *testing.T) {
	before, err := lockedBytes()
	if err != nil {
		t.Skip(err)
	}
	p, err := New(Options{Backend: NewHostBackend(hostOpts()), MinAvailable: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	b, err := p.TryGet(frame)
	if errors.Is(err, hostmem.ErrLockLimit) {
		t.Skipf("RLIMIT_MEMLOCK too small for one frame: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	during, _ := lockedBytes()
	if during < before+frame {
		t.Skipf("memory not locked (VmLck %d -> %d): no permission to mlock here", before, during)
	}
	b.Release()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	after, _ := lockedBytes()
	if after != before {
		t.Fatalf("VmLck %d before, %d after Close", before, after)
	}
}

// TestReserveSurvivesMaxIdle checks that Reserve beyond MaxIdle is kept by
// the background policy, and that Trim frees it.
func TestReserveSurvivesMaxIdle(t *testing.T) {
	p, f := newTestPool(t, Options{MaxIdle: 2, IdleTimeout: 20 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- p.Reserve(frame, 40) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Reserve beyond MaxIdle does not finish: it fights the idle policy")
	}
	time.Sleep(100 * time.Millisecond) // several janitor passes
	if idle := p.Stats().Classes[0].Idle; idle < 40 {
		t.Fatalf("the policy freed reserved buffers: %d idle", idle)
	}
	p.Trim()
	if live, _, _, _ := f.stats(); live != 0 {
		t.Fatalf("Trim left %d bytes", live)
	}
}

// TestMaxSizeIsTheLargestClass: MaxSize is written as a literal, so that
// the documentation shows no internal name; it must stay the bound of the
// size classes.
func TestMaxSizeIsTheLargestClass(t *testing.T) {
	if MaxSize != sizeclass.Max {
		t.Fatalf("MaxSize %d, the size classes end at %d", int64(MaxSize), int64(sizeclass.Max))
	}
}
