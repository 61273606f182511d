package pinpool

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The tests in this file try to break the pool's promises as a hostile
// user would: Close racing every call, fences and backends that fail or
// panic, requests that can never be served. Each names the promise it
// attacks.

// iterations is n, or n/10 in -short mode (at least 1).
func trustIterations(n int) int {
	if testing.Short() {
		return max(1, n/10)
	}
	return n
}

// waitLive waits (bounded) until the fake backend holds want bytes.
func waitLiveBytes(t *testing.T, f *fakeBackend, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		live, _, allocs, frees := f.stats()
		if live == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend holds %d bytes (%d allocations, %d frees), want %d", live, allocs, frees, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// Promise: a Get blocked for budget returns ErrClosed promptly after Close,
// wherever Close lands relative to it. Before the fix, a Get about to
// block when Close ran stayed blocked until some unrelated Release (155 of
// 1000 tries).
func TestCloseWakesBlockedGet(t *testing.T) {
	for i := range trustIterations(1000) {
		f := newFake()
		p, err := New(Options{Backend: f, Exact: true, Budget: frame + pageSize, MinAvailable: -1})
		if err != nil {
			t.Fatal(err)
		}
		held := mustGet(t, p, frame)
		done := make(chan error, 1)
		go func() {
			_, err := p.Get(context.Background(), frame)
			done <- err
		}()
		// Close at a random moment: before the Get runs, while it looks,
		// or after it sleeps.
		if d := rand.IntN(3); d > 0 {
			time.Sleep(time.Duration(rand.IntN(50*d)) * time.Microsecond)
		}
		p.Close()
		select {
		case err := <-done:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("try %d: blocked Get returned %v, want ErrClosed", i, err)
			}
		case <-time.After(time.Second):
			t.Fatalf("try %d: Get still blocked 1 s after Close", i)
		}
		held.Release()
		waitLiveBytes(t, f, 0)
	}
}

// Promise: Close racing every other call leaves nothing allocated once
// every buffer is back; every call returns success or a documented error;
// nothing panics.
func TestCloseRacesEveryCall(t *testing.T) {
	sizes := []int{4096, 64 << 10, 1 << 20, frame}
	for i := range trustIterations(200) {
		f := newFake()
		p, err := New(Options{Backend: f, Budget: 64 << 20, MinAvailable: -1, MaxIdle: 4, IdleTimeout: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			out   []Buffer
			stop  atomic.Bool
			wrong atomic.Value
		)
		allowed := func(err error) bool {
			return err == nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrBudget) || errors.Is(err, ErrReleased)
		}
		fail := func(what string, err error) {
			if !allowed(err) {
				wrong.Store(what + ": " + err.Error())
			}
		}
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				for k := 0; !stop.Load(); k++ {
					n := sizes[(g+k)%len(sizes)]
					switch (g + k) % 7 {
					case 0, 1:
						b, err := p.Get(ctx, n)
						fail("Get", err)
						if err == nil {
							mu.Lock()
							out = append(out, b)
							mu.Unlock()
						}
					case 2:
						b, err := p.TryGet(n)
						fail("TryGet", err)
						if err == nil {
							fail("Release", b.Release())
							fail("second Release", errOr(b.Release(), ErrReleased))
						}
					case 3:
						fail("Reserve", p.Reserve(n, 2))
					case 4:
						mu.Lock()
						if len(out) > 0 {
							b := out[len(out)-1]
							out = out[:len(out)-1]
							mu.Unlock()
							polls := 0
							fail("ReleaseAfter", b.ReleaseAfter(FenceFunc(func() (bool, error) { polls++; return polls > 2, nil })))
						} else {
							mu.Unlock()
						}
					case 5:
						p.Trim()
					case 6:
						_ = p.Stats()
					}
				}
			}()
		}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		if err := p.Close(); err != nil {
			t.Fatalf("try %d: Close: %v", i, err)
		}
		stop.Store(true)
		wg.Wait()
		if w := wrong.Load(); w != nil {
			t.Fatalf("try %d: %s", i, w)
		}
		for _, b := range out {
			if err := b.Release(); err != nil {
				t.Fatalf("try %d: release after Close: %v", i, err)
			}
		}
		waitLiveBytes(t, f, 0)
		if _, _, allocs, frees := f.stats(); allocs != frees {
			t.Fatalf("try %d: %d allocations, %d frees", i, allocs, frees)
		}
		if st := p.Stats(); st.BytesHeld != 0 {
			t.Fatalf("try %d: after Close Stats holds %d bytes: %+v", i, st.BytesHeld, st)
		}
	}
}

// errOr maps the expected error to nil, so that fail() reports anything else.
func errOr(err, expected error) error {
	if errors.Is(err, expected) {
		return nil
	}
	if err == nil {
		return errors.New("a second release succeeded")
	}
	return err
}

// Promise: Reserve racing Close never leaks a chunk (before the fix, about
// once in 10,000).
func TestReserveRacesClose(t *testing.T) {
	for i := range trustIterations(10000) {
		f := newFake()
		p, err := New(Options{Backend: f, MinAvailable: -1})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- p.Reserve(64<<10, 3) }()
		if i%2 == 0 {
			time.Sleep(time.Duration(rand.IntN(20)) * time.Microsecond)
		}
		p.Close()
		if err := <-errc; err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("try %d: Reserve: %v", i, err)
		}
		if live, _, allocs, frees := f.stats(); live != 0 {
			t.Fatalf("try %d: after Close and Reserve the backend holds %d bytes (%d allocations, %d frees)", i, live, allocs, frees)
		}
	}
}

// nilPtrFence is a fence type whose nil pointer would panic in Done.
type nilPtrFence struct{ done bool }

func (f *nilPtrFence) Done() (bool, error) { return f.done, nil }

// Promise: a fence that cannot be called is refused at ReleaseAfter with
// ErrInvalidFence, and the handle stays live (before the fix,
// FenceFunc(nil) panicked in the pool's goroutine).
func TestReleaseAfterNilFence(t *testing.T) {
	p, _ := newTestPool(t, Options{})
	for _, f := range []Fence{nil, FenceFunc(nil), (*nilPtrFence)(nil)} {
		b := mustGet(t, p, 4096)
		err := b.ReleaseAfter(f)
		if !errors.Is(err, ErrInvalidFence) {
			t.Fatalf("ReleaseAfter(%#v) = %v, want ErrInvalidFence", f, err)
		}
		if !b.Valid() {
			t.Fatalf("ReleaseAfter(%#v) refused but killed the handle", f)
		}
		if err := b.Release(); err != nil {
			t.Fatalf("Release after a refused fence: %v", err)
		}
		if err := b.ReleaseAfter(f); !errors.Is(err, ErrReleased) {
			t.Fatalf("ReleaseAfter(%#v) of a dead handle = %v, want ErrReleased", f, err)
		}
	}
}

// Promise: a fence whose Done panics is treated like a failing one: its
// buffer is retired and counted, no goroutine crashes, and every other
// pending buffer comes back. Both pollers are attacked: the janitor, and a
// Get that polls on the caller's goroutine. Before the fix the panic took
// the process down (janitor) or lost every other pending buffer (Get).
func TestPanickingFence(t *testing.T) {
	for _, poller := range []string{"janitor", "get"} {
		t.Run(poller, func(t *testing.T) {
			o := Options{Exact: true, MaxIdle: -1, IdleTimeout: -1}
			if poller == "get" {
				o.Budget = 4 * pageRound(frame) // the 5th Get must poll fences to find room
			}
			p, f := newTestPool(t, o)
			var bufs []Buffer
			for range 4 {
				bufs = append(bufs, mustGet(t, p, frame))
			}
			var ready atomic.Bool
			good := FenceFunc(func() (bool, error) { return ready.Load(), nil })
			bad := FenceFunc(func() (bool, error) {
				if ready.Load() {
					panic("fence exploded")
				}
				return false, nil
			})
			for i, b := range bufs {
				fence := good
				if i == 1 {
					fence = bad
				}
				if err := b.ReleaseAfter(fence); err != nil {
					t.Fatal(err)
				}
			}
			ready.Store(true)
			if poller == "get" {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				b, err := p.Get(ctx, frame)
				if err != nil {
					t.Fatalf("Get that polls fences: %v", err)
				}
				b.Release()
			}
			waitFor(t, "the good fences' buffers back and the panicking one retired", func() bool {
				st := p.Stats()
				return st.ReleasedAfterFence == 3 && st.FenceErrors == 1 && st.BytesPending == 0
			})
			st := p.Stats()
			if st.BytesRetired != int64(st.Classes[0].Size) {
				t.Fatalf("retired %d bytes, want one buffer: %+v", st.BytesRetired, st)
			}
			p.Close()
			// The retired buffer's chunk is freed with the rest (all its
			// other buffers are idle).
			waitLiveBytes(t, f, 0)
		})
	}
}

// Promise: after Close, fences still pending are polled for at most
// CloseWait, then no more; their memory stays allocated (the device may
// still use it) and a later Trim polls them again.
func TestCloseWaitBoundsPolling(t *testing.T) {
	p, f := newTestPool(t, Options{CloseWait: 30 * time.Millisecond})
	b := mustGet(t, p, frame)
	var polls atomic.Int64
	var complete atomic.Bool
	b.ReleaseAfter(FenceFunc(func() (bool, error) { polls.Add(1); return complete.Load(), nil }))
	p.Close()
	time.Sleep(200 * time.Millisecond)
	n := polls.Load()
	time.Sleep(300 * time.Millisecond)
	if m := polls.Load(); m != n {
		t.Fatalf("fence polled %d more times, long after CloseWait", m-n)
	}
	if n == 0 {
		t.Fatal("the fence was never polled")
	}
	if live, _, _, _ := f.stats(); live == 0 {
		t.Fatal("memory of a buffer whose fence never completed was freed")
	}
	if st := p.Stats(); st.BytesPending == 0 {
		t.Fatalf("the abandoned buffer is not counted as pending: %+v", st)
	}
	complete.Store(true)
	p.Trim()
	waitLiveBytes(t, f, 0)
}

// Promise: a backend panic in Alloc is contained: the caller gets ErrGrow
// with the panic value, the budget is not leaked, and the counters say so.
// Before the fix the reserved budget was never returned.
func TestBackendPanicInAlloc(t *testing.T) {
	fb := newFaultyBackend()
	p, err := New(Options{Backend: fb, Exact: true, Budget: 2 * 4 << 20, MinAvailable: -1, GrowCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fb.panicEvery.Store(1)
	for range 100 {
		_, err := p.TryGet(4 << 20)
		if !errors.Is(err, ErrGrow) || !strings.Contains(err.Error(), "panics") {
			t.Fatalf("TryGet with a panicking backend = %v, want ErrGrow with the panic value", err)
		}
	}
	st := p.Stats()
	if calls := uint64(fb.calls.Load()); st.BackendPanics != calls || st.Failures != calls || calls < 100 || calls > 200 || st.BytesHeld != 0 {
		t.Fatalf("after %d panicking Allocs for 100 Gets: %+v", calls, st)
	}
	fb.panicEvery.Store(0)
	a, err := p.TryGet(4 << 20)
	if err != nil {
		t.Fatalf("budget leaked by panics: %v", err)
	}
	b, err := p.TryGet(4 << 20)
	if err != nil {
		t.Fatalf("budget leaked by panics (second buffer): %v", err)
	}
	a.Release()
	b.Release()
}

// Promise: memory that breaks the contract (short, not page-aligned) is
// refused with ErrGrow and freed at once.
func TestBackendBadMemory(t *testing.T) {
	for _, bad := range []string{"short", "misaligned"} {
		t.Run(bad, func(t *testing.T) {
			fb := newFaultyBackend()
			p, err := New(Options{Backend: fb, MinAvailable: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if bad == "short" {
				fb.short.Store(true)
			} else {
				fb.misalign.Store(true)
			}
			for _, n := range []int{4096, frame} {
				if _, err := p.TryGet(n); !errors.Is(err, ErrGrow) {
					t.Fatalf("TryGet(%d) with %s memory = %v, want ErrGrow", n, bad, err)
				}
			}
			if live := fb.live(); live != 0 {
				t.Fatalf("%s memory not freed: %d bytes live", bad, live)
			}
			if st := p.Stats(); st.Failures != uint64(fb.calls.Load()) || st.BytesHeld != 0 {
				t.Fatalf("%d allocations: %+v", fb.calls.Load(), st)
			}
		})
	}
}

// Promise: a Free that fails or panics does not stop the pool from freeing
// the rest, is counted, and gives the budget back. Before the fix a panic
// in Free during Trim left chunks out of the pool and never freed.
func TestBackendFreeFaults(t *testing.T) {
	for _, mode := range []string{"error", "panic"} {
		t.Run(mode, func(t *testing.T) {
			fb := newFaultyBackend()
			p, err := New(Options{Backend: fb, Exact: true, Budget: 4 * pageRound(frame), GrowCount: 1, MinAvailable: -1})
			if err != nil {
				t.Fatal(err)
			}
			var bufs []Buffer
			for range 4 {
				bufs = append(bufs, mustGet(t, p, frame))
			}
			for _, b := range bufs {
				b.Release()
			}
			if mode == "error" {
				fb.freeFail.Store(true)
			} else {
				fb.freePanic.Store(true)
			}
			freed := p.Trim()
			st := p.Stats()
			if freed != 4*int64(st.Classes[0].Size) || st.BytesHeld != 0 || st.FreeFailures != st.Trims || st.Trims == 0 {
				t.Fatalf("Trim freed %d bytes; %+v", freed, st)
			}
			if mode == "panic" && st.BackendPanics != st.Trims {
				t.Fatalf("panics %d, want one per free (%d)", st.BackendPanics, st.Trims)
			}
			// The budget came back: the pool can hold 4 frames again.
			fb.freeFail.Store(false)
			fb.freePanic.Store(false)
			for i := range bufs {
				bufs[i] = mustGet(t, p, frame)
			}
			for _, b := range bufs {
				b.Release()
			}
			fb.freeFail.Store(mode == "error")
			fb.freePanic.Store(mode == "panic")
			if err := p.Close(); err == nil {
				t.Fatal("Close hid the backend's failing frees")
			}
			want := int64(0)
			if mode == "panic" {
				want = 8 * int64(st.Classes[0].Size) // panicking frees freed nothing
			}
			if live := fb.live(); live != want {
				t.Fatalf("backend holds %d bytes, want %d", live, want)
			}
		})
	}
}

// Promise: a slow backend does not hold up Get and Release of memory the
// pool already has, nor Stats.
func TestSlowBackendDoesNotBlockHits(t *testing.T) {
	fb := newFaultyBackend()
	p, err := New(Options{Backend: fb, MinAvailable: -1, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	mustGet(t, p, 4096).Release()
	fb.slow.Store(int64(300 * time.Millisecond))
	go p.TryGet(frame) // grows, slowly
	time.Sleep(10 * time.Millisecond)
	t0 := time.Now()
	for range 1000 {
		mustGet(t, p, 4096).Release()
	}
	_ = p.Stats()
	if d := time.Since(t0); d > 200*time.Millisecond {
		t.Fatalf("1000 hits and a Stats took %v while the backend was slow", d)
	}
}

// Promise: a request that can never be served fails at once, says why,
// and trims nothing on the way.
func TestImpossibleRequestsFailAtOnce(t *testing.T) {
	t.Run("larger than Budget", func(t *testing.T) {
		p, f := newTestPool(t, Options{Budget: 8 << 20})
		mustGet(t, p, 4096).Release() // idle memory that must not be trimmed
		_, live0, _, _ := f.stats()
		t0 := time.Now()
		_, err := p.Get(context.Background(), 16<<20)
		if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "Budget") {
			t.Fatalf("Get(16 MiB) under an 8 MiB budget = %v", err)
		}
		if d := time.Since(t0); d > 100*time.Millisecond {
			t.Fatalf("took %v", d)
		}
		if live, _, _, _ := f.stats(); live != live0 {
			t.Fatalf("an impossible request trimmed idle memory: %d -> %d bytes", live0, live)
		}
	})
	t.Run("MaxSize against the system guard", func(t *testing.T) {
		f := newFake()
		p, err := New(Options{Backend: f}) // default guard: 3% of MemTotal
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		t0 := time.Now()
		_, err = p.Get(ctx, int(MaxSize))
		if err == nil || errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > time.Second {
			t.Fatalf("Get(MaxSize) = %v after %v, want an error at once", err, time.Since(t0))
		}
		if !errors.Is(err, ErrLowMemory) {
			t.Fatalf("Get(MaxSize) = %v, want ErrLowMemory (MemTotal is far below 1 TiB)", err)
		}
	})
	t.Run("Budget below one slab", func(t *testing.T) {
		p, _ := newTestPool(t, Options{Budget: 1 << 20})
		var bufs []Buffer
		for range 256 {
			bufs = append(bufs, mustGet(t, p, 4096))
		}
		if _, err := p.TryGet(4096); !errors.Is(err, ErrBudget) {
			t.Fatalf("257th 4 KiB buffer under a 1 MiB budget: %v", err)
		}
		for _, b := range bufs {
			b.Release()
		}
	})
}

// Promise: what Reserve keeps is freed only by Trim and Close, not by the
// budget's trimming for other sizes (before the fix, a Get of another size
// under budget pressure freed it).
func TestReserveSurvivesBudgetPressure(t *testing.T) {
	p, _ := newTestPool(t, Options{Budget: 16 << 20, Exact: true})
	if err := p.Reserve(64<<10, 16); err != nil {
		t.Fatal(err)
	}
	reserved := p.Stats().BytesHeld
	if _, err := p.TryGet(16<<20 - 64<<10); !errors.Is(err, ErrBudget) {
		t.Fatalf("TryGet of what only trimming the reserve could fit: %v, want ErrBudget", err)
	}
	st := p.Stats()
	if st.BytesHeld != reserved || st.Classes[0].Idle < 16 {
		t.Fatalf("the reserve was trimmed: %+v", st)
	}
	if p.Trim() != reserved {
		t.Fatal("Trim did not free the reserve")
	}
}

// Promise: the counters count each event once. One Get on a fresh pool is
// one miss; Release then Get is a hit; one 4 KiB buffer in use is 4096
// bytes in use (not the slab); a Get that waits for room, then is served,
// is one wait and one miss, however often it wakes.
func TestCountersCountOnce(t *testing.T) {
	p, _ := newTestPool(t, Options{Exact: true, Budget: 8 << 20, MaxIdle: -1, SlabMax: -1})
	b := mustGet(t, p, 4096)
	st := p.Stats()
	if st.Gets != 1 || st.Misses != 1 || st.Hits != 0 || st.BytesInUse != 4096 {
		t.Fatalf("one Get: %+v", st)
	}
	b.Release()
	b = mustGet(t, p, 4096)
	st = p.Stats()
	if st.Gets != 2 || st.Hits != 1 || st.Misses != 1 || st.BytesInUse != 4096 {
		t.Fatalf("Release then Get: %+v", st)
	}
	b.Release()
	p.Trim()

	big := mustGet(t, p, 6<<20)
	done := make(chan error, 1)
	go func() {
		b, err := p.Get(context.Background(), 6<<20)
		if err == nil {
			b.Release()
		}
		done <- err
	}()
	waitFor(t, "the second Get to wait", func() bool { return p.Stats().BudgetWaits == 1 })
	for range 20 { // wake the waiter many times without room
		x := mustGet(t, p, 4096)
		x.Release()
		p.Trim()
	}
	big.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st = p.Stats()
	if st.BudgetWaits != 1 || st.Gets != st.Hits+st.Misses {
		t.Fatalf("one waiting Get: %+v", st)
	}
	for _, c := range st.Classes {
		if c.Size == 6<<20 && (c.Gets != 2 || c.Misses != 2) {
			t.Fatalf("6 MiB class: %+v (want 2 gets, 2 misses: one grew, one waited)", c)
		}
	}
}
