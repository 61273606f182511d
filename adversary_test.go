package pinpool

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinpool/pinpool/hostmem"
)

// Adversarial tests of the pool's public promises (see the package's
// contract: Close, fences, backend faults, impossible requests, counters).
// Every test that could hang is bounded and fails with a message instead.
// The fault-injecting backend is in faultbackend_test.go, the options
// tests in fuzz_options_test.go.

// advN is n with PINPOOL_SOAK=1 (envSoak), else short.
func advN(n, short int) int {
	if !soak() {
		return short
	}
	return n
}

// errList collects failures from many goroutines, keeping the first few.
type errList struct {
	mu   sync.Mutex
	msgs []string
	n    int
}

func (e *errList) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if len(e.msgs) < 20 {
		e.msgs = append(e.msgs, fmt.Sprintf(format, args...))
	}
}

func (e *errList) report(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n > 0 {
		t.Errorf("%d failures; the first %d:\n  %s", e.n, len(e.msgs), strings.Join(e.msgs, "\n  "))
	}
}

// isOneOf reports whether err is nil or matches one of the targets.
func isOneOf(err error, targets ...error) bool {
	if err == nil {
		return true
	}
	for _, t := range targets {
		if t != nil && errors.Is(err, t) {
			return true
		}
	}
	return false
}

// countFence reports done after `after` calls (never when after < 0,
// until forced) and counts its calls.
type countFence struct {
	after int64
	force atomic.Bool
	calls atomic.Int64
}

func (f *countFence) Done() (bool, error) {
	n := f.calls.Add(1)
	return f.force.Load() || f.after >= 0 && n > f.after, nil
}

// --- 2. Close never leaves a Get hanging --------------------------------

// TestAdvCloseWakesBlockedGet: a Get blocked for budget (Budget = one
// buffer, that buffer held) returns ErrClosed within 1 s after Close, even
// with context.Background(), wherever Close lands relative to the Get.
func TestAdvCloseWakesBlockedGet(t *testing.T) {
	iters := advN(1000, 200)
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range iters {
		fb := newFaultBackend()
		p, err := New(Options{Backend: fb, MinAvailable: -1, Budget: pageSize, SlabMax: -1, GrowCount: 1})
		if err != nil {
			t.Fatal(err)
		}
		held, err := p.TryGet(pageSize)
		if err != nil {
			t.Fatalf("iteration %d: TryGet: %v", i, err)
		}
		started := make(chan struct{})
		res := make(chan error, 1)
		go func() {
			close(started)
			b, err := p.Get(context.Background(), pageSize)
			if err == nil {
				b.Release()
				err = errors.New("Get served while the whole budget was held")
			}
			res <- err
		}()
		mode := i % 5
		switch mode {
		case 0: // Close at once: the Get may not have started
		case 1:
			<-started
			runtime.Gosched()
		case 2:
			<-started
			for range rng.IntN(5000) {
				_ = rng.Uint64()
			}
		case 3:
			<-started
			time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
		case 4: // the Get has registered as a waiter and is about to sleep
			<-started
			waitUntil(time.Second, func() bool { return p.Stats().BudgetWaits > 0 })
		}
		if err := closeWithin(t, p, 5*time.Second); err != nil {
			t.Fatalf("iteration %d: Close: %v", i, err)
		}
		timer := time.NewTimer(time.Second)
		select {
		case err := <-res:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("iteration %d (mode %d): blocked Get returned %v, want ErrClosed", i, mode, err)
			}
		case <-timer.C:
			t.Fatalf("iteration %d (mode %d): Get still blocked 1 s after Close returned (budget waits %d)", i, mode, p.Stats().BudgetWaits)
		}
		timer.Stop()
		if err := held.Release(); err != nil {
			t.Fatalf("iteration %d: Release after Close: %v", i, err)
		}
		if !fb.waitReleased(t, fmt.Sprintf("iteration %d", i)) {
			t.FailNow()
		}
		fb.check(t)
	}
}

// TestAdvCloseRacesEverything: Close lands in the middle of concurrent
// Get, TryGet, Reserve, Release, ReleaseAfter, Trim and Stats calls. No
// panic; every call returns success or ErrClosed (ErrBudget too for
// TryGet and Reserve under a budget, ErrReleased for a double release);
// once everything is released, the backend holds nothing and freed every
// allocation it made.
func TestAdvCloseRacesEverything(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int64
	}{{"no budget", 0}, {"budget", 8 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			iters := advN(200, 30)
			sizes := []int{1, 4096, 65536, 1 << 20, frame}
			var errs errList
			for it := range iters {
				fb := newFaultBackend()
				p, err := New(Options{Backend: fb, MinAvailable: -1, Budget: tc.budget, MaxIdle: 2, IdleDecay: time.Millisecond, IdleTimeout: 5 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				var budgetErr error
				if tc.budget > 0 {
					budgetErr = ErrBudget
				}
				stop := make(chan struct{})
				var wg sync.WaitGroup
				var mu sync.Mutex
				var leftovers []Buffer
				for g := range 6 {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(it), uint64(g)))
						var held []Buffer
						defer func() {
							mu.Lock()
							leftovers = append(leftovers, held...)
							mu.Unlock()
						}()
						for {
							select {
							case <-stop:
								return
							default:
							}
							n := sizes[rng.IntN(len(sizes))]
							switch op := rng.IntN(12); {
							case op < 2 && len(held) < 3:
								b, err := p.Get(context.Background(), n)
								if !isOneOf(err, ErrClosed) {
									errs.add("iteration %d: Get(%d): %v", it, n, err)
								} else if err == nil {
									held = append(held, b)
								}
							case op < 4 && len(held) < 3:
								b, err := p.TryGet(n)
								if !isOneOf(err, ErrClosed, budgetErr) {
									errs.add("iteration %d: TryGet(%d): %v", it, n, err)
								} else if err == nil {
									held = append(held, b)
								}
							case op == 4:
								if err := p.Reserve(n, 1+rng.IntN(3)); !isOneOf(err, ErrClosed, budgetErr) {
									errs.add("iteration %d: Reserve(%d): %v", it, n, err)
								}
							case op < 8 && len(held) > 0:
								b := held[len(held)-1]
								held = held[:len(held)-1]
								if err := b.Release(); err != nil {
									errs.add("iteration %d: Release: %v", it, err)
								}
								if err := b.Release(); !errors.Is(err, ErrReleased) {
									errs.add("iteration %d: double Release: %v, want ErrReleased", it, err)
								}
							case op == 8 && len(held) > 0:
								b := held[len(held)-1]
								held = held[:len(held)-1]
								if err := b.ReleaseAfter(&countFence{after: int64(rng.IntN(3))}); err != nil {
									errs.add("iteration %d: ReleaseAfter: %v", it, err)
								}
							case op == 9:
								p.Trim()
							case op == 10:
								st := p.Stats()
								if st.BytesHeld != st.BytesInUse+st.BytesIdle+st.BytesPending+st.BytesRetired {
									errs.add("iteration %d: Stats do not add up: %+v", it, st)
								}
							default:
								runtime.Gosched()
							}
						}
					})
				}
				time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
				if err := closeWithin(t, p, 5*time.Second); err != nil {
					t.Fatalf("iteration %d: Close: %v", it, err)
				}
				time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
				close(stop)
				mustWithin(t, 10*time.Second, "the callers after Close", wg.Wait)
				for _, b := range leftovers {
					if err := b.Release(); err != nil {
						t.Fatalf("iteration %d: Release after Close: %v", it, err)
					}
				}
				if !fb.waitReleased(t, fmt.Sprintf("iteration %d, after Close and every release", it)) {
					t.Fatalf("stats: %+v", p.Stats())
				}
				fb.check(t)
				if st := p.Stats(); st.BytesHeld != 0 || st.BytesInUse != 0 || st.BytesPending != 0 {
					t.Fatalf("iteration %d: Stats after Close and every release: %+v", it, st)
				}
				if tc.budget > 0 {
					if _, maxLive, _, _ := fb.stats(); maxLive > tc.budget {
						t.Fatalf("iteration %d: backend peak %d over Budget %d", it, maxLive, tc.budget)
					}
				}
			}
			errs.report(t)
		})
	}
}

// TestAdvReserveRacesClose: Reserve racing Close never leaks a chunk.
func TestAdvReserveRacesClose(t *testing.T) {
	iters := advN(10000, 1000)
	rng := rand.New(rand.NewPCG(3, 4))
	sizes := []int{4096, 65536, 1 << 20, frame}
	for i := range iters {
		fb := newFaultBackend()
		p, err := New(Options{Backend: fb, MinAvailable: -1})
		if err != nil {
			t.Fatal(err)
		}
		n, count := sizes[rng.IntN(len(sizes))], 1+rng.IntN(8)
		delay := rng.IntN(3)
		res := make(chan error, 1)
		go func() { res <- p.Reserve(n, count) }()
		switch delay {
		case 1:
			runtime.Gosched()
		case 2:
			time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond)
		}
		if err := closeWithin(t, p, 5*time.Second); err != nil {
			t.Fatalf("iteration %d: Close: %v", i, err)
		}
		var rerr error
		mustWithin(t, 5*time.Second, "Reserve racing Close", func() { rerr = <-res })
		if !isOneOf(rerr, ErrClosed) {
			t.Fatalf("iteration %d: Reserve(%d, %d): %v, want nil or ErrClosed", i, n, count, rerr)
		}
		if !fb.waitReleased(t, fmt.Sprintf("iteration %d: Reserve(%d, %d) racing Close (Reserve: %v)", i, n, count, rerr)) {
			t.FailNow()
		}
		fb.check(t)
	}
}

// TestAdvCloseDuringSlowAlloc: Close while a growth is inside a slow
// backend Alloc returns, the Get fails with ErrClosed (or is served, if it
// won), and the new chunk is not leaked.
func TestAdvCloseDuringSlowAlloc(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		fb := newFaultBackend()
		fb.allocDelay.Store(int64(50 * time.Millisecond))
		p, err := New(Options{Backend: fb, MinAvailable: -1})
		if err != nil {
			t.Fatal(err)
		}
		res := make(chan error, 1)
		go func() {
			var b Buffer
			var err error
			if blocking {
				b, err = p.Get(context.Background(), frame)
			} else {
				b, err = p.TryGet(frame)
			}
			if err == nil {
				err = b.Release()
			}
			res <- err
		}()
		if !waitUntil(2*time.Second, func() bool { return fb.allocCalls.Load() > 0 }) {
			t.Fatal("the Get never reached the backend")
		}
		if err := closeWithin(t, p, 5*time.Second); err != nil {
			t.Fatalf("Close: %v", err)
		}
		var gerr error
		mustWithin(t, 5*time.Second, "a Get growing while Close runs", func() { gerr = <-res })
		if !isOneOf(gerr, ErrClosed) {
			t.Fatalf("Get during a slow Alloc racing Close: %v", gerr)
		}
		fb.waitReleased(t, "after Close during a slow Alloc")
		fb.check(t)
	}
}

// --- 3. Fences ---------------------------------------------------------

type valueFence struct{}

func (valueFence) Done() (bool, error) { return true, nil }

// TestAdvReleaseAfterNilFence: a fence that cannot be called is refused
// with ErrInvalidFence and the handle stays live.
func TestAdvReleaseAfterNilFence(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Fence
	}{
		{"nil interface", nil},
		{"nil FenceFunc", FenceFunc(nil)},
		{"nil *countFence", (*countFence)(nil)},
		{"nil pointer to a value-receiver fence", (*valueFence)(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newFaultPool(t, Options{})
			b, err := p.TryGet(pageSize)
			if err != nil {
				t.Fatal(err)
			}
			err = b.ReleaseAfter(tc.f)
			if !errors.Is(err, ErrInvalidFence) {
				t.Fatalf("ReleaseAfter(%s) = %v, want an error wrapping ErrInvalidFence", tc.name, err)
			}
			if !b.Valid() || b.Bytes() == nil {
				t.Fatalf("ReleaseAfter(%s) was refused but killed the handle", tc.name)
			}
			b.Bytes()[0] = 1 // still ours
			if st := p.Stats(); st.BytesInUse != pageSize || st.BytesPending != 0 {
				t.Fatalf("after a refused ReleaseAfter: in use %d, pending %d; want %d, 0", st.BytesInUse, st.BytesPending, pageSize)
			}
			if err := b.Release(); err != nil {
				t.Fatalf("Release after a refused ReleaseAfter: %v", err)
			}
		})
	}
}

// panicFence panics in Done with value v and counts its calls, and on
// which goroutines (the test's own, as a Get polls, or another).
type panicFence struct {
	v            any
	calls        atomic.Int64
	onTestThread atomic.Int64
}

func (f *panicFence) Done() (bool, error) {
	f.calls.Add(1)
	buf := make([]byte, 8<<10)
	if strings.Contains(string(buf[:runtime.Stack(buf, false)]), "testing.tRunner") {
		f.onTestThread.Add(1)
	}
	panic(f.v)
}

var advPanicValues = []struct {
	name string
	v    any
}{
	{"string", "fence exploded"},
	{"error", errors.New("fence error value")},
	{"int", 42},
	{"nil", nil},
}

// TestAdvFencePanics: a fence whose Done panics crashes nothing; its
// buffer is retired (FenceErrors, BytesRetired until its chunk is freed)
// and every other pending buffer comes back when its fence reports done.
func TestAdvFencePanics(t *testing.T) {
	for _, pv := range advPanicValues {
		t.Run(pv.name, func(t *testing.T) {
			p, fb := newFaultPool(t, Options{MaxIdle: -1, IdleTimeout: -1})
			get := func(n int) Buffer {
				t.Helper()
				b, err := p.TryGet(n)
				if err != nil {
					t.Fatalf("TryGet(%d): %v", n, err)
				}
				return b
			}
			a, keep := get(pageSize), get(pageSize) // one slab: keep holds it alive
			c, d, e := get(65536), get(frame), get(frame)
			retiredPtr, cPtr := a.Pointer(), c.Pointer()
			pf := &panicFence{v: pv.v}
			others := []*countFence{{after: 3}, {after: 3}, {after: 3}}
			for i, x := range []struct {
				b Buffer
				f Fence
			}{{c, others[0]}, {a, pf}, {d, others[1]}, {e, others[2]}} {
				if err := x.b.ReleaseAfter(x.f); err != nil {
					t.Fatalf("ReleaseAfter #%d: %v", i, err)
				}
			}
			if !waitUntil(5*time.Second, func() bool { return p.Stats().BytesPending == 0 }) {
				t.Fatalf("pending buffers never came back: %+v (panicking fence called %d times)", p.Stats(), pf.calls.Load())
			}
			st := p.Stats()
			if st.FenceErrors != 1 || st.ReleasedAfterFence != 3 {
				t.Errorf("FenceErrors %d, ReleasedAfterFence %d; want 1 and 3", st.FenceErrors, st.ReleasedAfterFence)
			}
			if st.BytesRetired != pageSize {
				t.Errorf("BytesRetired %d while the retired buffer's slab is alive, want %d", st.BytesRetired, pageSize)
			}
			if st.BackendPanics != 0 {
				t.Errorf("a fence panic counted as a backend panic: BackendPanics %d", st.BackendPanics)
			}
			for _, f := range others {
				if f.calls.Load() < 4 {
					t.Errorf("a fence was called %d times but its buffer came back", f.calls.Load())
				}
			}
			// The other buffers are idle and reused; the retired one is never handed out.
			c2, d2 := get(65536), get(frame)
			if c2.Pointer() != cPtr {
				t.Errorf("the 64 KiB buffer did not come back for reuse")
			}
			d2.Release()
			c2.Release()
			var bufs []Buffer
			for range 1100 { // more than the slab's 1024 buffers
				b := get(pageSize)
				if b.Pointer() == retiredPtr {
					t.Fatal("the retired buffer was handed out again")
				}
				bufs = append(bufs, b)
			}
			for _, b := range bufs {
				b.Release()
			}
			if err := keep.Release(); err != nil {
				t.Fatal(err)
			}
			p.Trim()
			if st := p.Stats(); st.BytesRetired != 0 || st.BytesHeld != 0 || st.FenceErrors != 1 {
				t.Errorf("after Trim: BytesRetired %d, BytesHeld %d, FenceErrors %d; want 0, 0, 1", st.BytesRetired, st.BytesHeld, st.FenceErrors)
			}
			fb.waitReleased(t, "after the retired buffer's slab was trimmed")
		})
	}
}

// TestAdvFencePanicOnCallerGoroutine: with the whole budget pending behind
// a panicking fence, the next TryGet or Get polls the fence (often on the
// caller's goroutine): no panic escapes, the buffer is retired, its memory
// freed, and the Get is served.
func TestAdvFencePanicOnCallerGoroutine(t *testing.T) {
	p, fb := newFaultPool(t, Options{Budget: pageSize, SlabMax: -1, GrowCount: 1, MaxIdle: -1, IdleTimeout: -1})
	iters := advN(200, 50)
	var onCaller int64
	for i := range iters {
		b, err := p.TryGet(pageSize)
		if err != nil {
			t.Fatalf("iteration %d: TryGet: %v", i, err)
		}
		pf := &panicFence{v: fmt.Sprintf("panic %d", i)}
		if err := b.ReleaseAfter(pf); err != nil {
			t.Fatal(err)
		}
		c, err := p.TryGet(pageSize)
		if err != nil {
			if !errors.Is(err, ErrBudget) {
				t.Fatalf("iteration %d: TryGet after a panicking fence: %v", i, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			c, err = p.Get(ctx, pageSize)
			cancel()
			if err != nil {
				t.Fatalf("iteration %d: Get with the budget behind a panicking fence: %v (%+v)", i, err, p.Stats())
			}
		}
		onCaller += pf.onTestThread.Load()
		c.Release()
	}
	st := p.Stats()
	if st.FenceErrors != uint64(iters) {
		t.Errorf("FenceErrors %d after %d panicking fences", st.FenceErrors, iters)
	}
	t.Logf("%d of %d panicking fences were polled on the caller's goroutine", onCaller, iters)
	if onCaller == 0 {
		t.Log("note: no fence was polled on the caller's goroutine; that path went untested")
	}
	p.Trim()
	fb.waitReleased(t, "after Trim")
}

// TestAdvFenceNeverCompletes: Close returns although a fence never
// completes; the pool polls it for CloseWait and then stops, leaving its
// memory allocated; negative CloseWait polls until it completes.
func TestAdvFenceNeverCompletes(t *testing.T) {
	t.Run("CloseWait 50ms stops polling", func(t *testing.T) {
		p, fb := newFaultPool(t, Options{CloseWait: 50 * time.Millisecond})
		b, err := p.TryGet(frame)
		if err != nil {
			t.Fatal(err)
		}
		f := &countFence{after: -1}
		if err := b.ReleaseAfter(f); err != nil {
			t.Fatal(err)
		}
		if err := closeWithin(t, p, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		// The background goroutine polls for CloseWait and ends: no
		// bound on how long that takes on a loaded machine, but once it
		// has ended nothing polls the fence any more.
		mustWithin(t, 30*time.Second, "the background goroutine's end after CloseWait", func() { <-p.jan.done })
		n1 := f.calls.Load()
		time.Sleep(20 * time.Millisecond)
		if n2 := f.calls.Load(); n2 != n1 {
			t.Errorf("the pool still polls the fence after CloseWait 50ms has passed: %d calls, then %d", n1, n2)
		}
		if n1 == 0 {
			t.Error("the pool never polled the pending fence")
		}
		if live, _, _, _ := fb.stats(); live == 0 {
			t.Error("memory behind a fence that never completed was freed")
		}
		if st := p.Stats(); st.BytesPending == 0 {
			t.Errorf("Stats does not count the abandoned buffer as pending: %+v", st)
		}
		// Documented: a later Trim polls it again; once done, it is freed.
		f.force.Store(true)
		p.Trim()
		fb.waitReleased(t, "Trim after the abandoned fence completed")
	})
	t.Run("default CloseWait, Close returns at once", func(t *testing.T) {
		p, fb := newFaultPool(t, Options{})
		b, err := p.TryGet(frame)
		if err != nil {
			t.Fatal(err)
		}
		var done atomic.Bool
		if err := b.ReleaseAfter(FenceFunc(func() (bool, error) { return done.Load(), nil })); err != nil {
			t.Fatal(err)
		}
		// Well within the default CloseWait of a minute: Close does not
		// wait for the fence.
		if err := closeWithin(t, p, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if live, _, _, _ := fb.stats(); live == 0 {
			t.Error("memory behind a pending fence was freed by Close")
		}
		done.Store(true)
		fb.waitReleased(t, "after the fence completed (within CloseWait)")
	})
	t.Run("negative CloseWait polls on", func(t *testing.T) {
		p, fb := newFaultPool(t, Options{CloseWait: -1})
		b, err := p.TryGet(frame)
		if err != nil {
			t.Fatal(err)
		}
		f := &countFence{after: -1}
		if err := b.ReleaseAfter(f); err != nil {
			t.Fatal(err)
		}
		if err := closeWithin(t, p, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		// Polling goes on at its longest back-off (100 ms): many more
		// calls come, however late the poller runs.
		n1 := f.calls.Load()
		if !waitUntil(30*time.Second, func() bool { return f.calls.Load() >= n1+5 }) {
			t.Errorf("CloseWait < 0: polling stopped (%d calls, then %d)", n1, f.calls.Load())
		}
		f.force.Store(true)
		fb.waitReleased(t, "after the fence completed (CloseWait < 0)")
	})
}

// --- 4. Backend faults ---------------------------------------------------

// TestAdvAllocPanic: a panic in Alloc is an error wrapping ErrGrow with the
// panic value, counted in BackendPanics and Failures, and leaks no budget.
func TestAdvAllocPanic(t *testing.T) {
	const size = 64 << 10
	p, fb := newFaultPool(t, Options{Budget: 2 * size, Exact: true, SlabMax: -1, GrowCount: 1})
	fb.panicEvery.Store(1)
	for i := range 100 {
		var err error
		if i%2 == 0 {
			_, err = p.TryGet(size)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err = p.Get(ctx, size)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Get on a panicking backend waited for room: %v", err)
			}
		}
		if !errors.Is(err, ErrGrow) || !strings.Contains(fmt.Sprint(err), faultPanicMsg) {
			t.Fatalf("Get #%d on a panicking backend: %v; want ErrGrow with the panic value %q", i, err, faultPanicMsg)
		}
		if errors.Is(err, ErrBudget) {
			t.Fatalf("Get #%d: a backend panic reported as ErrBudget (budget leaked?): %v", i, err)
		}
	}
	st := p.Stats()
	if panics := fb.panics.Load(); st.BackendPanics != uint64(panics) || st.Failures != uint64(panics) || panics < 100 {
		t.Errorf("BackendPanics %d, Failures %d; the backend panicked %d times", st.BackendPanics, st.Failures, panics)
	}
	if st.BytesHeld != 0 {
		t.Errorf("BytesHeld %d after only failed growths", st.BytesHeld)
	}
	fb.panicEvery.Store(0)
	b1, err1 := p.TryGet(size)
	b2, err2 := p.TryGet(size)
	if err1 != nil || err2 != nil {
		t.Fatalf("after 100 panics, two buffers within Budget (2 buffers): %v, %v — budget leaked", err1, err2)
	}
	if _, err := p.TryGet(size); !errors.Is(err, ErrBudget) {
		t.Errorf("a third buffer over Budget: %v", err)
	}
	b1.Release()
	b2.Release()
}

// TestAdvBadMemory: memory that is short or misaligned is refused with
// ErrGrow and freed; the pool serves again once the backend behaves.
func TestAdvBadMemory(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*faultBackend, bool)
	}{
		{"one page short", func(b *faultBackend, on bool) { b.shortBy.Store(map[bool]int64{true: pageSize}[on]) }},
		{"one byte short", func(b *faultBackend, on bool) { b.shortBy.Store(map[bool]int64{true: 1}[on]) }},
		{"nil", func(b *faultBackend, on bool) { b.shortBy.Store(map[bool]int64{true: -1}[on]) }},
		{"misaligned", func(b *faultBackend, on bool) { b.misalign.Store(on) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, fb := newFaultPool(t, Options{})
			tc.set(fb, true)
			for _, n := range []int{pageSize, 65536, frame} {
				if b, err := p.TryGet(n); !errors.Is(err, ErrGrow) {
					if err == nil {
						b.Release()
					}
					t.Fatalf("TryGet(%d) on bad memory: %v, want ErrGrow", n, err)
				}
				if live, _, allocs, frees := fb.stats(); live != 0 {
					t.Fatalf("TryGet(%d): the bad allocation was not freed: %d bytes live (%d allocations, %d frees)", n, live, allocs, frees)
				}
			}
			if st := p.Stats(); st.Failures == 0 || st.BytesHeld != 0 {
				t.Errorf("Failures %d, BytesHeld %d after bad memory", st.Failures, st.BytesHeld)
			}
			tc.set(fb, false)
			for _, n := range []int{pageSize, 65536, frame} {
				b, err := p.TryGet(n)
				if err != nil {
					t.Fatalf("TryGet(%d) once the backend behaves: %v", n, err)
				}
				b.Release()
			}
		})
	}
}

// TestAdvFreeFaults: a Free that errors or panics during Trim or Close
// does not stop the other frees; FreeFailures counts each; Close reports
// an error; the budget is released.
func TestAdvFreeFaults(t *testing.T) {
	sizes := []int{64 << 10, 128 << 10, 256 << 10, 512 << 10} // distinct classes, one chunk each
	var total int64
	for _, n := range sizes {
		total += int64(n)
	}
	for _, mode := range []string{"error", "panic"} {
		for _, via := range []string{"Trim", "Close"} {
			t.Run(mode+" in "+via, func(t *testing.T) {
				p, fb := newFaultPool(t, Options{Budget: total, Exact: true, SlabMax: -1, GrowCount: 1, MaxIdle: -1, IdleTimeout: -1})
				var bufs []Buffer
				for _, n := range sizes {
					b, err := p.TryGet(n)
					if err != nil {
						t.Fatalf("TryGet(%d): %v", n, err)
					}
					bufs = append(bufs, b)
				}
				if _, _, allocs, _ := fb.stats(); allocs != len(sizes) {
					t.Fatalf("%d allocations for %d buffers of distinct classes", allocs, len(sizes))
				}
				for _, b := range bufs {
					b.Release()
				}
				if mode == "error" {
					fb.freeErrEvery.Store(2)
				} else {
					fb.freePanicEvery.Store(2)
				}
				var closeErr error
				if via == "Trim" {
					mustWithin(t, 5*time.Second, "Trim with failing frees", func() { p.Trim() })
				} else {
					closeErr = closeWithin(t, p, 5*time.Second)
				}
				nLeaked, leaked := fb.leakedNow()
				live, _, _, _ := fb.stats()
				if fb.freeCalls.Load() != int64(len(sizes)) || nLeaked != len(sizes)/2 {
					t.Fatalf("%d Free calls, %d failed; want %d and %d", fb.freeCalls.Load(), nLeaked, len(sizes), len(sizes)/2)
				}
				if live != leaked {
					t.Errorf("backend holds %d bytes, want only the %d whose Free failed: the other chunks were not freed", live, leaked)
				}
				st := p.Stats()
				if st.FreeFailures != uint64(nLeaked) {
					t.Errorf("FreeFailures %d, want %d", st.FreeFailures, nLeaked)
				}
				if mode == "panic" && st.BackendPanics != uint64(nLeaked) {
					t.Errorf("BackendPanics %d, want %d", st.BackendPanics, nLeaked)
				}
				if st.BytesHeld != 0 {
					t.Errorf("BytesHeld %d after freeing everything (failed frees are lost to the pool)", st.BytesHeld)
				}
				if via == "Close" {
					if closeErr == nil {
						t.Error("Close returned nil although frees failed")
					} else {
						t.Logf("Close: %v", closeErr)
					}
					return
				}
				fb.freeErrEvery.Store(0)
				fb.freePanicEvery.Store(0)
				b, err := p.TryGet(int(total)) // the whole budget in one buffer
				if err != nil {
					t.Fatalf("TryGet of the whole Budget after failed frees: %v — budget not released", err)
				}
				b.Release()
			})
		}
	}
}

// --- 5. Requests that can never succeed fail at once --------------------

func TestAdvImpossibleRequests(t *testing.T) {
	t.Run("larger than Budget", func(t *testing.T) {
		p, fb := newFaultPool(t, Options{Budget: 8 << 20})
		for _, n := range []int{16 << 20, 8<<20 + 1} {
			var err error
			// No deadline: a Get that waited for room would never return.
			mustWithin(t, 30*time.Second, fmt.Sprintf("Get(%d) over the whole Budget", n), func() {
				_, err = p.Get(context.Background(), n)
			})
			if !errors.Is(err, ErrBudget) || !strings.Contains(strings.ToLower(fmt.Sprint(err)), "budget") {
				t.Errorf("Get(%d) over the whole Budget: %v; want ErrBudget saying why", n, err)
			}
		}
		if _, _, allocs, _ := fb.stats(); allocs != 0 {
			t.Errorf("the backend was asked %d times for requests that cannot fit", allocs)
		}
	})
	t.Run("MaxSize with the default system guard", func(t *testing.T) {
		mi, err := hostmem.ReadMemInfo()
		if err != nil {
			t.Skip(err)
		}
		if int64(mi.Total) >= 2*int64(MaxSize) {
			t.Skipf("MemTotal %d: MaxSize could fit", mi.Total)
		}
		fb := newFaultBackend()
		p, err := New(Options{Backend: fb}) // MinAvailable 0: 3% of MemTotal
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var gerr error
		// No deadline: a Get that waited for room would never return.
		mustWithin(t, 30*time.Second, "Get(MaxSize)", func() {
			var b Buffer
			b, gerr = p.Get(context.Background(), int(MaxSize))
			if gerr == nil {
				b.Release()
			}
		})
		if !errors.Is(gerr, ErrBudget) && !errors.Is(gerr, ErrGrow) {
			t.Errorf("Get(MaxSize) = %v, want ErrLowMemory, ErrBudget or ErrGrow at once", gerr)
		}
		t.Logf("Get(MaxSize): %v", gerr)
		p.Close()
		fb.waitReleased(t, "after Get(MaxSize)")
		fb.check(t)
	})
}

// TestAdvReserveKeptUnderPressure: buffers kept by Reserve are not freed
// by budget pressure from another size.
func TestAdvReserveKeptUnderPressure(t *testing.T) {
	const small = 64 << 10
	p, fb := newFaultPool(t, Options{Budget: 16 << 20, MaxIdle: -1, IdleTimeout: -1})
	if err := p.Reserve(small, 16); err != nil {
		t.Fatal(err)
	}
	before := p.Stats()
	held := before.BytesHeld
	big := int(16<<20-held) + 1 // more than the rest of the budget
	if _, err := p.TryGet(big); !errors.Is(err, ErrBudget) {
		t.Fatalf("TryGet(%d) with %d of 16 MiB held by Reserve: %v, want ErrBudget", big, held, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	if _, err := p.Get(ctx, big); !errors.Is(err, ErrBudget) {
		t.Fatalf("Get(%d) with the budget held by Reserve: %v", big, err)
	}
	cancel()
	st := p.Stats()
	var idle int64
	for _, c := range st.Classes {
		if c.Size == small {
			idle = c.Idle
		}
	}
	if idle < 16 || st.BytesHeld < held {
		t.Fatalf("budget pressure freed reserved buffers: %d idle of 64 KiB (want >= 16), held %d then %d", idle, held, st.BytesHeld)
	}
	if live, _, _, _ := fb.stats(); live < held {
		t.Fatalf("backend holds %d bytes, less than the reserved %d", live, held)
	}
}

// --- 6. Counters -----------------------------------------------------------

// advCheckSnapshot returns what is wrong with one snapshot.
func advCheckSnapshot(st Stats) []string {
	var bad []string
	f := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if sum := st.BytesInUse + st.BytesIdle + st.BytesPending + st.BytesRetired; st.BytesHeld != sum {
		f("BytesHeld %d != InUse %d + Idle %d + Pending %d + Retired %d = %d", st.BytesHeld, st.BytesInUse, st.BytesIdle, st.BytesPending, st.BytesRetired, sum)
	}
	if st.Budget > 0 && st.BytesHeld > st.Budget {
		f("BytesHeld %d > Budget %d", st.BytesHeld, st.Budget)
	}
	if st.BytesHeld != st.BytesGrown-st.BytesTrimmed {
		f("BytesHeld %d != BytesGrown %d - BytesTrimmed %d", st.BytesHeld, st.BytesGrown, st.BytesTrimmed)
	}
	if st.PeakHeld < st.BytesHeld || st.PeakHeld > st.BytesGrown {
		f("PeakHeld %d not within [BytesHeld %d, BytesGrown %d]", st.PeakHeld, st.BytesHeld, st.BytesGrown)
	}
	if st.Gets != st.Hits+st.Misses {
		f("Gets %d != Hits %d + Misses %d", st.Gets, st.Hits, st.Misses)
	}
	if st.TrimsBy.Sum() != st.Trims {
		f("Trims %d != the sum of TrimsBy %v", st.Trims, st.TrimsBy)
	}
	for _, c := range st.Classes {
		if c.BuffersHeld != c.InUse+c.Idle+c.Pending {
			f("class %d: BuffersHeld %d != InUse %d + Idle %d + Pending %d", c.Size, c.BuffersHeld, c.InUse, c.Idle, c.Pending)
		}
		if c.Gets != c.Hits+c.Misses {
			f("class %d: Gets %d != Hits %d + Misses %d", c.Size, c.Gets, c.Hits, c.Misses)
		}
	}
	return bad
}

// advCounters are the counters that must never go back, by name.
func advCounters(st Stats) map[string]uint64 {
	m := map[string]uint64{
		"Gets": st.Gets, "Hits": st.Hits, "Misses": st.Misses, "Grows": st.Grows,
		"BytesGrown": uint64(st.BytesGrown), "Trims": st.Trims, "BytesTrimmed": uint64(st.BytesTrimmed),
		"ReleasedAfterFence": st.ReleasedAfterFence, "FenceErrors": st.FenceErrors, "Failures": st.Failures,
		"BudgetWaits": st.BudgetWaits, "BudgetRefusals": st.BudgetRefusals, "LowMemoryRefusals": st.LowMemoryRefusals,
		"FreeFailures": st.FreeFailures, "BackendPanics": st.BackendPanics, "PeakHeld": uint64(st.PeakHeld),
	}
	for _, r := range TrimReasons() {
		m["Trims "+r.String()] = st.TrimsBy.Of(r)
	}
	for _, c := range st.Classes {
		m[fmt.Sprintf("class %d Gets", c.Size)] = c.Gets
		m[fmt.Sprintf("class %d Hits", c.Size)] = c.Hits
		m[fmt.Sprintf("class %d Misses", c.Size)] = c.Misses
		m[fmt.Sprintf("class %d Grows", c.Size)] = c.Grows
	}
	return m
}

// TestAdvStatsUnderLoad samples Stats in a loop while 8 goroutines load the
// pool, and checks every snapshot and the monotonicity of every counter.
func TestAdvStatsUnderLoad(t *testing.T) {
	const budget = 24 << 20
	p, _ := newFaultPool(t, Options{Budget: budget, MaxIdle: 4, IdleDecay: time.Millisecond, IdleTimeout: 20 * time.Millisecond})
	d := time.Duration(advN(2000, 500)) * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	sizes := []int{4096, 20000, 65536, 1 << 20, frame, 5 << 20}
	var errs errList
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 99))
			var held []Buffer
			defer func() {
				for _, b := range held {
					b.Release()
				}
			}()
			for ctx.Err() == nil {
				n := sizes[rng.IntN(len(sizes))]
				switch op := rng.IntN(20); {
				case op < 5 && len(held) < 4:
					wctx, c := context.WithTimeout(ctx, 20*time.Millisecond)
					b, err := p.Get(wctx, n)
					c()
					if err == nil {
						held = append(held, b)
					} else if !errors.Is(err, ErrBudget) {
						errs.add("Get(%d): %v", n, err)
					}
				case op < 9 && len(held) < 4:
					b, err := p.TryGet(n)
					if err == nil {
						held = append(held, b)
					} else if !errors.Is(err, ErrBudget) {
						errs.add("TryGet(%d): %v", n, err)
					}
				case op < 14 && len(held) > 0:
					i := rng.IntN(len(held))
					if err := held[i].Release(); err != nil {
						errs.add("Release: %v", err)
					}
					held = append(held[:i], held[i+1:]...)
				case op < 18 && len(held) > 0:
					i := rng.IntN(len(held))
					if err := held[i].ReleaseAfter(&countFence{after: int64(1 + rng.IntN(4))}); err != nil {
						errs.add("ReleaseAfter: %v", err)
					}
					held = append(held[:i], held[i+1:]...)
				case op == 18:
					p.Trim()
				}
			}
		})
	}
	var snapshots int
	wg.Go(func() {
		prev := p.Stats()
		for ctx.Err() == nil {
			st := p.Stats()
			snapshots++
			for _, m := range advCheckSnapshot(st) {
				errs.add("snapshot %d: %s", snapshots, m)
			}
			old := advCounters(prev)
			for k, v := range advCounters(st) {
				if o, ok := old[k]; ok && v < o {
					errs.add("snapshot %d: %s went back from %d to %d", snapshots, k, o, v)
				}
			}
			for k := range old {
				if strings.HasPrefix(k, "class ") {
					if _, ok := advCounters(st)[k]; !ok {
						errs.add("snapshot %d: %s disappeared", snapshots, k)
					}
				}
			}
			prev = st
		}
	})
	mustWithin(t, d+20*time.Second, "the load", wg.Wait)
	errs.report(t)
	st := p.Stats()
	t.Logf("%d snapshots; gets %d, misses %d, budget waits %d, refusals %d, trims %d, fenced %d", snapshots, st.Gets, st.Misses, st.BudgetWaits, st.BudgetRefusals, st.Trims, st.ReleasedAfterFence)
	if snapshots < 10 {
		t.Errorf("only %d snapshots taken", snapshots)
	}
	if !waitUntil(5*time.Second, func() bool { return p.Stats().BytesPending == 0 }) {
		t.Errorf("fences never drained: %+v", p.Stats())
	}
	for _, m := range advCheckSnapshot(p.Stats()) {
		t.Errorf("final snapshot: %s", m)
	}
}

// TestAdvStatsExactCounts: single events counted exactly once.
func TestAdvStatsExactCounts(t *testing.T) {
	p, _ := newFaultPool(t, Options{})
	b, err := p.TryGet(pageSize)
	if err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.Gets != 1 || st.Misses != 1 || st.Hits != 0 {
		t.Errorf("one Get on a fresh pool: Gets %d Misses %d Hits %d; want 1 1 0", st.Gets, st.Misses, st.Hits)
	}
	if st.BytesInUse != pageSize {
		t.Errorf("BytesInUse %d with one 4 KiB buffer out, want %d (not the slab size)", st.BytesInUse, pageSize)
	}
	if len(st.Classes) != 1 || st.Classes[0].Gets != 1 || st.Classes[0].Misses != 1 || st.Classes[0].InUse != 1 {
		t.Errorf("class stats after one Get: %+v", st.Classes)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if b, err = p.Get(context.Background(), pageSize); err != nil {
		t.Fatal(err)
	}
	st = p.Stats()
	if st.Gets != 2 || st.Hits != 1 || st.Misses != 1 {
		t.Errorf("Release then Get: Gets %d Hits %d Misses %d; want 2 1 1", st.Gets, st.Hits, st.Misses)
	}
	if st.Grows != 1 {
		t.Errorf("Grows %d, want 1", st.Grows)
	}
	b.Release()
	// Invalid sizes and closed pools are not Gets.
	p.TryGet(0)
	p.TryGet(-1)
	if st := p.Stats(); st.Gets != 2 {
		t.Errorf("invalid sizes counted as Gets: %d", st.Gets)
	}
}

// TestAdvBudgetWaitCountedOnce: a Get that waits for budget, is woken
// several times, and is then served counts one BudgetWait and one Miss.
func TestAdvBudgetWaitCountedOnce(t *testing.T) {
	p, _ := newFaultPool(t, Options{Budget: 2 * pageSize, Exact: true, SlabMax: -1, GrowCount: 1, MaxIdle: -1, IdleTimeout: -1})
	a, err1 := p.TryGet(pageSize)
	b, err2 := p.TryGet(pageSize)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	before := p.Stats()
	res := make(chan error, 1)
	go func() {
		c, err := p.Get(context.Background(), 2*pageSize)
		if err == nil {
			err = c.Release()
		}
		res <- err
	}()
	if !waitUntil(2*time.Second, func() bool { return p.Stats().BudgetWaits > before.BudgetWaits }) {
		t.Fatal("the Get never waited for budget")
	}
	// Wake it several times without making enough room.
	a.Release()
	for range 5 {
		time.Sleep(2 * time.Millisecond)
		if x, err := p.TryGet(pageSize); err == nil {
			x.Release()
		}
	}
	select {
	case err := <-res:
		t.Fatalf("Get of 8 KiB served while 4 KiB of an 8 KiB budget was in use: %v", err)
	default:
	}
	b.Release()
	var gerr error
	mustWithin(t, 3*time.Second, "the waiting Get after a release made room", func() { gerr = <-res })
	if gerr != nil {
		t.Fatal(gerr)
	}
	after := p.Stats()
	if w := after.BudgetWaits - before.BudgetWaits; w != 1 {
		t.Errorf("one waiting Get counted %d BudgetWaits", w)
	}
	for _, c := range after.Classes {
		if c.Size == 2*pageSize && (c.Gets != 1 || c.Misses != 1 || c.Hits != 0) {
			t.Errorf("the waiting Get's class: Gets %d Misses %d Hits %d; want 1 1 0", c.Gets, c.Misses, c.Hits)
		}
	}
}

// --- 7. Model-based stress -------------------------------------------------

// advOwners is the model: which live handle owns which address range.
type advOwners struct {
	mu   sync.Mutex
	live map[uintptr]advOwner
}

type advOwner struct {
	g   int
	end uintptr
}

func (o *advOwners) take(g int, b Buffer) error {
	lo := uintptr(b.Pointer())
	hi := lo + uintptr(b.Cap())
	o.mu.Lock()
	defer o.mu.Unlock()
	if w, ok := o.live[lo]; ok {
		return fmt.Errorf("address %#x handed to goroutine %d while goroutine %d holds it", lo, g, w.g)
	}
	for a, w := range o.live {
		if a < hi && lo < w.end {
			return fmt.Errorf("buffer [%#x, %#x) of goroutine %d overlaps [%#x, %#x) of goroutine %d", lo, hi, g, a, w.end, w.g)
		}
	}
	o.live[lo] = advOwner{g, hi}
	return nil
}

func (o *advOwners) drop(g int, b Buffer) error {
	lo := uintptr(b.Pointer())
	o.mu.Lock()
	defer o.mu.Unlock()
	if w, ok := o.live[lo]; !ok || w.g != g {
		return fmt.Errorf("goroutine %d releases %#x, which the model gives to %v (present %v)", g, lo, w.g, ok)
	}
	delete(o.live, lo)
	return nil
}

// advStamp writes v over the buffer: one word per page and at the end.
func advStamp(b Buffer, v uint64) {
	m := b.Bytes()
	if len(m) < 8 {
		for i := range m {
			m[i] = byte(v)
		}
		return
	}
	for off := 0; off+8 <= len(m); off += pageSize {
		binary.LittleEndian.PutUint64(m[off:], v)
	}
	binary.LittleEndian.PutUint64(m[len(m)-8:], v)
}

// advCheckStamp returns where the stamp was overwritten, or -1.
func advCheckStamp(b Buffer, v uint64) int {
	m := b.Bytes()
	if len(m) < 8 {
		for i := range m {
			if m[i] != byte(v) {
				return i
			}
		}
		return -1
	}
	for off := 0; off+8 <= len(m); off += pageSize {
		if binary.LittleEndian.Uint64(m[off:]) != v {
			return off
		}
	}
	if binary.LittleEndian.Uint64(m[len(m)-8:]) != v {
		return len(m) - 8
	}
	return -1
}

// TestAdvModelStress: 8 goroutines do random operations; a model of who
// holds which address checks that no memory is ever held by two live
// handles, and a stamp in every buffer detects writes by another holder.
func TestAdvModelStress(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failEvery int64
		d, short  time.Duration
	}{
		{"plain", 0, 5 * time.Second, time.Second},
		{"failing backend", 5, 2 * time.Second, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const budget = 64 << 20
			p, fb := newFaultPool(t, Options{Budget: budget, MaxIdle: 4, IdleDecay: time.Millisecond, IdleTimeout: 10 * time.Millisecond})
			fb.failEvery.Store(tc.failEvery)
			var growErr error
			if tc.failEvery > 0 {
				growErr = ErrGrow
			}
			d := tc.d
			if !soak() {
				d = tc.short
			}
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			sizes := []int{1, 100, 4096, 5000, 65536, 1 << 20, frame, 4 << 20}
			model := &advOwners{live: map[uintptr]advOwner{}}
			var errs errList
			var ops atomic.Int64
			var wg sync.WaitGroup
			type held struct {
				b     Buffer
				stamp uint64
			}
			var mu sync.Mutex
			var leftovers []held
			for g := range 8 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 1234))
					var mine []held
					var stale []Buffer
					var seq uint64
					defer func() {
						mu.Lock()
						leftovers = append(leftovers, mine...)
						mu.Unlock()
					}()
					got := func(b Buffer) {
						if err := model.take(g, b); err != nil {
							errs.add("%v", err)
						}
						seq++
						v := uint64(g)<<56 | seq
						advStamp(b, v)
						mine = append(mine, held{b, v})
					}
					// let removes a held buffer, checks its stamp and drops it from
					// the model before it is released.
					let := func(i int) Buffer {
						h := mine[i]
						mine = append(mine[:i], mine[i+1:]...)
						if off := advCheckStamp(h.b, h.stamp); off >= 0 {
							errs.add("goroutine %d: buffer %p (%d bytes) overwritten at offset %d by another holder", g, h.b.Pointer(), h.b.Len(), off)
						}
						if err := model.drop(g, h.b); err != nil {
							errs.add("%v", err)
						}
						return h.b
					}
					for ctx.Err() == nil {
						ops.Add(1)
						n := sizes[rng.IntN(len(sizes))]
						switch op := rng.IntN(20); {
						case op < 4 && len(mine) < 6:
							wctx, c := context.WithTimeout(ctx, 2*time.Millisecond)
							b, err := p.Get(wctx, n)
							c()
							if err != nil {
								if !isOneOf(err, ErrBudget, growErr) {
									errs.add("Get(%d): %v", n, err)
								}
								continue
							}
							got(b)
						case op < 8 && len(mine) < 6:
							b, err := p.TryGet(n)
							if err != nil {
								if !isOneOf(err, ErrBudget, growErr) {
									errs.add("TryGet(%d): %v", n, err)
								}
								continue
							}
							got(b)
						case op < 12 && len(mine) > 0:
							b := let(rng.IntN(len(mine)))
							if err := b.Release(); err != nil {
								errs.add("Release: %v", err)
							}
							stale = append(stale, b)
						case op < 15 && len(mine) > 0:
							b := let(rng.IntN(len(mine)))
							var f Fence
							if rng.IntN(2) == 0 {
								f = &countFence{after: int64(rng.IntN(5))}
							} else {
								deadline := time.Now().Add(time.Duration(rng.IntN(300)) * time.Microsecond)
								f = FenceFunc(func() (bool, error) { return time.Now().After(deadline), nil })
							}
							if err := b.ReleaseAfter(f); err != nil {
								errs.add("ReleaseAfter: %v", err)
							}
							stale = append(stale, b)
						case op == 15 && len(stale) > 0:
							s := stale[rng.IntN(len(stale))]
							if err := s.Release(); !errors.Is(err, ErrReleased) {
								errs.add("Release of a stale handle: %v, want ErrReleased", err)
							}
							if err := s.ReleaseAfter(&countFence{}); !errors.Is(err, ErrReleased) {
								errs.add("ReleaseAfter of a stale handle: %v, want ErrReleased", err)
							}
							if s.Valid() || s.Bytes() != nil || s.Pointer() != nil {
								errs.add("a stale handle still gives memory")
							}
						case op == 16:
							if rng.IntN(10) == 0 {
								p.Trim()
							}
						case op == 17:
							if err := p.Reserve(n, 1+rng.IntN(2)); !isOneOf(err, ErrBudget, growErr) {
								errs.add("Reserve(%d): %v", n, err)
							}
						case op == 18:
							for _, m := range advCheckSnapshot(p.Stats()) {
								errs.add("Stats: %s", m)
							}
						}
						if len(stale) > 32 {
							stale = stale[16:]
						}
					}
				})
			}
			mustWithin(t, d+30*time.Second, "the stress goroutines", wg.Wait)
			if err := closeWithin(t, p, 5*time.Second); err != nil {
				t.Errorf("Close: %v", err)
			}
			for _, h := range leftovers {
				if off := advCheckStamp(h.b, h.stamp); off >= 0 {
					errs.add("buffer %p overwritten at offset %d", h.b.Pointer(), off)
				}
				if err := h.b.Release(); err != nil {
					errs.add("Release after Close: %v", err)
				}
			}
			errs.report(t)
			fb.waitReleased(t, "after Close and every release")
			fb.check(t)
			_, maxLive, allocs, frees := fb.stats()
			if maxLive > budget {
				t.Errorf("backend peak %d over Budget %d", maxLive, budget)
			}
			if allocs != frees {
				t.Errorf("%d allocations, %d frees", allocs, frees)
			}
			st := p.Stats()
			t.Logf("%d ops; %d gets (%d misses), %d grows, %d trims, %d budget waits, %d failures", ops.Load(), st.Gets, st.Misses, st.Grows, st.Trims, st.BudgetWaits, st.Failures)
		})
	}
}

// TestAdvStatsConsistentWhileClassesAppear: Stats is consistent even while
// goroutines make the first Gets of new size classes: every chunk the
// pool holds belongs to a class that the snapshot lists.
func TestAdvStatsConsistentWhileClassesAppear(t *testing.T) {
	iters := advN(400, 80)
	sizes := []int{4096, 65536, 1 << 20, frame}
	var errs errList
	for it := range iters {
		p, fb := newFaultPoolNoCleanup(t, Options{})
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 4 * len(sizes) { // several goroutines race to make each class
			wg.Go(func() {
				<-start
				n := sizes[g%len(sizes)]
				for range 3 {
					b, err := p.TryGet(n)
					if err != nil {
						errs.add("iteration %d: TryGet(%d): %v", it, n, err)
						return
					}
					runtime.Gosched()
					b.Release()
				}
			})
		}
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				st := p.Stats()
				for _, m := range advCheckSnapshot(st) {
					errs.add("iteration %d: %s (classes listed: %d, grows %d)", it, m, len(st.Classes), st.Grows)
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
		garbage := make(chan struct{}) // GC pressure: allocations park in GC assists
		go func() {
			defer close(garbage)
			var sink [][]byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				sink = append(sink, make([]byte, 64<<10))
				if len(sink) > 64 {
					sink = nil
				}
			}
		}()
		close(start)
		mustWithin(t, 10*time.Second, "first Gets of new classes", wg.Wait)
		close(stop)
		<-sampled
		<-garbage
		if err := closeWithin(t, p, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		fb.waitReleased(t, "after Close")
	}
	errs.report(t)
}

// newFaultPoolNoCleanup is newFaultPool for loops: the caller closes the
// pool and checks the backend.
func newFaultPoolNoCleanup(t testing.TB, o Options) (*Pool, *faultBackend) {
	t.Helper()
	fb := newFaultBackend()
	o.Backend = fb
	if o.MinAvailable == 0 {
		o.MinAvailable = -1
	}
	p, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p, fb
}

// TestAdvBudgetNotLeakedUnderFaults: under concurrent load, with a backend
// that fails, panics, returns short memory and fails to free, and fences
// that fail or panic, the budget's bookkeeping stays exact: once
// everything is back and trimmed the pool holds nothing, and a buffer of
// the whole Budget can be had.
func TestAdvBudgetNotLeakedUnderFaults(t *testing.T) {
	const budget = 16 << 20
	p, fb := newFaultPool(t, Options{Budget: budget, Exact: true, MaxIdle: 2, IdleDecay: time.Millisecond, IdleTimeout: 5 * time.Millisecond})
	fb.failEvery.Store(7)
	fb.panicEvery.Store(11)
	fb.freeErrEvery.Store(5)
	fb.freePanicEvery.Store(13)
	d := time.Duration(advN(2000, 400)) * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	sizes := []int{4096, 20000, 65536, 1 << 20, frame, 6 << 20}
	var errs errList
	var wg sync.WaitGroup
	wg.Go(func() { // chaos: short memory now and then
		for ctx.Err() == nil {
			fb.shortBy.Store(int64(rand.IntN(4)) * pageSize / 2)
			time.Sleep(time.Millisecond)
		}
		fb.shortBy.Store(0)
	})
	for g := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 77))
			var held []Buffer
			defer func() {
				for _, b := range held {
					b.Release()
				}
			}()
			for ctx.Err() == nil {
				n := sizes[rng.IntN(len(sizes))]
				switch op := rng.IntN(12); {
				case op < 5 && len(held) < 4:
					wctx, c := context.WithTimeout(ctx, 5*time.Millisecond)
					b, err := p.Get(wctx, n)
					c()
					if err == nil {
						held = append(held, b)
					} else if !isOneOf(err, ErrBudget, ErrGrow) {
						errs.add("Get(%d): %v", n, err)
					}
				case op < 8 && len(held) > 0:
					i := rng.IntN(len(held))
					b := held[i]
					held = append(held[:i], held[i+1:]...)
					var f Fence = &countFence{after: int64(rng.IntN(3))}
					switch rng.IntN(6) {
					case 0:
						f = FenceFunc(func() (bool, error) { return false, errors.New("device lost") })
					case 1:
						f = &panicFence{v: "fence panic under load"}
					case 2, 3:
						if err := b.Release(); err != nil {
							errs.add("Release: %v", err)
						}
						continue
					}
					if err := b.ReleaseAfter(f); err != nil {
						errs.add("ReleaseAfter: %v", err)
					}
				case op == 8:
					p.Trim()
				case op == 9:
					if err := p.Reserve(n, 1); !isOneOf(err, ErrBudget, ErrGrow) {
						errs.add("Reserve(%d): %v", n, err)
					}
				case op == 10:
					for _, m := range advCheckSnapshot(p.Stats()) {
						errs.add("Stats: %s", m)
					}
				}
			}
		})
	}
	mustWithin(t, d+20*time.Second, "the faulty load", wg.Wait)
	errs.report(t)
	if !waitUntil(5*time.Second, func() bool { return p.Stats().BytesPending == 0 }) {
		t.Fatalf("fences never drained: %+v", p.Stats())
	}
	fb.failEvery.Store(0)
	fb.panicEvery.Store(0)
	fb.freeErrEvery.Store(0)
	fb.freePanicEvery.Store(0)
	p.Trim()
	st := p.Stats()
	if st.BytesHeld != 0 {
		t.Fatalf("after everything came back and Trim, BytesHeld %d: %+v", st.BytesHeld, st)
	}
	nLeaked, leaked := fb.leakedNow()
	if live, _, _, _ := fb.stats(); live != leaked {
		t.Errorf("backend holds %d bytes; only the %d bytes of %d failed frees may remain", live, leaked, nLeaked)
	}
	if st.FreeFailures != uint64(fb.freeFaults.Load()) {
		t.Errorf("FreeFailures %d, the backend failed %d frees", st.FreeFailures, fb.freeFaults.Load())
	}
	if want := uint64(fb.panics.Load() + fb.freePanics.Load()); st.BackendPanics != want {
		t.Errorf("BackendPanics %d, the backend panicked %d times", st.BackendPanics, want)
	}
	b, err := p.TryGet(budget)
	if err != nil {
		t.Fatalf("TryGet of the whole Budget after the faulty load: %v — budget leaked (%+v)", err, st)
	}
	b.Release()
	t.Logf("gets %d, failures %d (panics %d), free failures %d, fence errors %d, retired now %d", st.Gets, st.Failures, st.BackendPanics, st.FreeFailures, st.FenceErrors, st.BytesRetired)
}

// TestAdvSlowBackendDoesNotBlockHits: a backend stuck in a slow Alloc
// (a driver call under its global lock) holds up neither Get and Release
// of memory the pool already has, nor Stats: growth runs outside every
// lock the hot path or Stats takes.
func TestAdvSlowBackendDoesNotBlockHits(t *testing.T) {
	p, fb := newFaultPool(t, Options{Exact: true})
	mustGet(t, p, 4096).Release()
	fb.allocDelay.Store(int64(300 * time.Millisecond))
	grew := make(chan struct{})
	go func() {
		defer close(grew)
		if b, err := p.TryGet(frame); err == nil { // grows, slowly
			b.Release()
		}
	}()
	time.Sleep(10 * time.Millisecond)
	mustWithin(t, 200*time.Millisecond, "1000 hits and a Stats while the backend is slow", func() {
		for range 1000 {
			mustGet(t, p, 4096).Release()
		}
		_ = p.Stats()
	})
	<-grew
}
