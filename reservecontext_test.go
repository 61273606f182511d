package pinpool

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinpool/pinpool/hostmem"
)

// stepBackend is a ContextBackend over plain mappings (never touched, so
// large sizes cost nothing) that makes each allocation in four steps,
// reporting progress after each. Allocations of holdSize stop before
// their last step until the test sends on resume, or until their context
// is done; entered receives their size when they stop. limit > 0 makes it
// a GrowLimiter. It records the size of every allocation.
type stepBackend struct {
	fake     *fakeBackend
	holdSize int
	entered  chan int
	resume   chan struct{}
	limit    int

	mu    sync.Mutex
	sizes []int
}

func newStepBackend() *stepBackend {
	f := newFake()
	f.inner = nil
	return &stepBackend{fake: f, entered: make(chan int, 16), resume: make(chan struct{})}
}

func (b *stepBackend) Name() string { return "step" }

func (b *stepBackend) Alloc(size int) (Allocation, error) {
	return b.AllocContext(context.Background(), size, nil)
}

func (b *stepBackend) AllocContext(ctx context.Context, size int, progress func(int)) (Allocation, error) {
	b.mu.Lock()
	b.sizes = append(b.sizes, size)
	b.mu.Unlock()
	for step := 1; step <= 4; step++ {
		if step == 4 && size == b.holdSize {
			b.entered <- size
			select {
			case <-b.resume:
			case <-ctx.Done():
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if progress != nil {
			progress(size / 4 * step)
		}
	}
	return b.fake.Alloc(size)
}

func (b *stepBackend) GrowLimit() int { return b.limit }

func (b *stepBackend) allocSizes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.sizes)
}

func newStepPool(t *testing.T, b *stepBackend, o Options) *Pool {
	t.Helper()
	o.Backend, o.MinAvailable = b, -1
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		if live, _, _, _ := b.fake.stats(); live != 0 {
			t.Errorf("after Close the backend still holds %d bytes", live)
		}
	})
	return p
}

// TestReserveContextProgress checks that a large Reserve grows in
// allocations of at most 1 GiB, reports its progress rising to the whole,
// and that a single buffer larger than that is one allocation.
func TestReserveContextProgress(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n, count  int
		wantAlloc int // largest allocation
	}{
		{"2 MiB blocks", 2 << 20, 2048, 1 << 30},
		{"one buffer", 3 << 30, 1, 3 << 30},
		{"slab buffers", 64 << 10, 20000, 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newStepBackend()
			p := newStepPool(t, b, Options{IdleDecay: -1, IdleTimeout: -1})
			var seen [][2]int64
			if err := p.ReserveContext(context.Background(), tc.n, tc.count, func(made, total int64) {
				seen = append(seen, [2]int64{made, total})
			}); err != nil {
				t.Fatal(err)
			}
			sizes := b.allocSizes()
			if m := slices.Max(sizes); m > tc.wantAlloc {
				t.Errorf("largest allocation %d bytes, want at most %d", m, tc.wantAlloc)
			}
			if len(seen) == 0 {
				t.Fatal("no progress reported")
			}
			total := seen[0][1]
			for i, s := range seen {
				if s[1] != total || i > 0 && s[0] < seen[i-1][0] || s[0] > s[1] {
					t.Fatalf("progress %v: want made rising within one total", seen)
				}
			}
			if last := seen[len(seen)-1]; last[0] != last[1] || last[1] < int64(tc.count)*int64(tc.n) {
				t.Fatalf("last progress %v, want the whole of at least %d bytes", last, tc.count*tc.n)
			}
		})
	}
}

// TestReserveBoundedByGrowLimit checks that a backend's GrowLimit bounds
// every allocation, of Reserve and of Gets, except a single buffer larger
// than the limit.
func TestReserveBoundedByGrowLimit(t *testing.T) {
	b := newStepBackend()
	b.limit = 4 << 20
	p := newStepPool(t, b, Options{IdleDecay: -1, IdleTimeout: -1})
	if err := p.Reserve(2<<20, 64); err != nil {
		t.Fatal(err)
	}
	var held []Buffer
	for range 40 {
		held = append(held, mustGet(t, p, 1<<20))
	}
	for _, h := range held {
		h.Release()
	}
	if m := slices.Max(b.allocSizes()); m > b.limit {
		t.Fatalf("an allocation of %d bytes under a GrowLimit of %d", m, b.limit)
	}
	big := mustGet(t, p, 16<<20)
	big.Release()
	if m := slices.Max(b.allocSizes()); m != 16<<20 {
		t.Fatalf("largest allocation %d, want the single 16 MiB buffer's", m)
	}
}

// TestReserveCancelled checks that a Reserve cancelled while an allocation
// is under way stops, with ctx's error, keeps no claim and frees what it
// grew that no Get took, while the buffers a Get took stay valid.
func TestReserveCancelled(t *testing.T) {
	b := newStepBackend()
	p := newStepPool(t, b, Options{IdleDecay: -1, IdleTimeout: -1})
	const n = 2 << 20
	b.holdSize = 1 << 30 // every full allocation of this Reserve holds
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.ReserveContext(ctx, n, 2048, nil) }()
	<-b.entered // the first allocation is under way
	b.resume <- struct{}{}
	<-b.entered // the second
	// The first allocation's buffers are usable at once.
	got, err := p.TryGet(n)
	if err != nil {
		t.Fatalf("TryGet while the Reserve grows on: %v", err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Reserve: %v, want context.Canceled", err)
	}
	c, _ := p.classFor(n)
	if r := c.reserved.Load(); r != 0 {
		t.Errorf("a cancelled Reserve left a claim of %d", r)
	}
	// The chunk the Get took stays; nothing else is held.
	if live, _, _, _ := b.fake.stats(); live != 1<<30 {
		t.Errorf("after the cancel the backend holds %d bytes, want the one allocation a Get uses (%d)", live, 1<<30)
	}
	if got.Bytes() == nil {
		t.Fatal("the buffer a Get took died with the cancel")
	}
	got.Release()
}

// TestCloseStopsReserve checks that Close racing a Reserve in the middle of
// a long allocation does not wait for it: the allocation stops, Reserve
// returns ErrClosed, and nothing is left allocated.
func TestCloseStopsReserve(t *testing.T) {
	b := newStepBackend()
	p := newStepPool(t, b, Options{})
	b.holdSize = 8 << 30
	errc := make(chan error, 1)
	go func() { errc <- p.Reserve(8<<30, 1) }()
	<-b.entered
	mustWithin(t, 5*time.Second, "Close during a Reserve", func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("Reserve that Close stopped: %v, want ErrClosed", err)
	}
	if live, _, _, _ := b.fake.stats(); live != 0 {
		t.Fatalf("after Close the backend holds %d bytes", live)
	}
}

// TestGrowthBlocksNoOtherGets checks that while one size grows (an
// allocation that does not finish), Gets of other sizes, and Gets of the
// same size that idle memory can serve, are served at once.
func TestGrowthBlocksNoOtherGets(t *testing.T) {
	b := newStepBackend()
	p := newStepPool(t, b, Options{IdleDecay: -1, IdleTimeout: -1})
	const n = 4 << 20
	if err := p.Reserve(n, 2); err != nil {
		t.Fatal(err)
	}
	b.holdSize = 1 << 30
	var reserving sync.WaitGroup
	reserving.Go(func() { p.Reserve(n, 300) })
	<-b.entered
	var served atomic.Int32
	mustWithin(t, 5*time.Second, "Gets while another growth is held", func() {
		for _, size := range []int{n, n, 64 << 10, 3 << 20, 1 << 30 / 3} {
			buf, err := p.TryGet(size)
			if err != nil {
				t.Errorf("TryGet(%d) during a growth: %v", size, err)
				continue
			}
			served.Add(1)
			defer buf.Release()
		}
	})
	b.resume <- struct{}{}
	reserving.Wait()
	if served.Load() != 5 {
		t.Fatalf("%d of 5 Gets served during the growth", served.Load())
	}
}

// TestFailedReserveGivesBack checks that a Reserve whose backend fails
// part-way frees what it grew.
func TestFailedReserveGivesBack(t *testing.T) {
	f := newFaultBackend()
	f.fake.inner = nil // plain mappings, never touched
	p, _ := newTestPool(t, Options{Backend: f, IdleDecay: -1, IdleTimeout: -1})
	// Two allocations of 1 GiB; the second fails, and so does the
	// retry with a single buffer.
	err := p.ReserveContext(context.Background(), 4<<20, 512, func(made, total int64) { f.failEvery.Store(1) })
	if err == nil {
		t.Fatal("Reserve over a failing backend succeeded")
	}
	f.failEvery.Store(0)
	if st := p.Stats(); st.BytesHeld != 0 || st.TrimsBy.Of(TrimReserveFailed) == 0 {
		t.Fatalf("after the failed Reserve the pool holds %d bytes (%d freed as reserve_failed), want 0", st.BytesHeld, st.TrimsBy.Of(TrimReserveFailed))
	}
}

// TestCloseRacesReserveHost races Close with Reserves on locked host
// memory: each Reserve either succeeds or returns ErrClosed (or, under a
// small RLIMIT_MEMLOCK that other tests share, the lock limit's error), and
// once both are done the backend holds nothing.
func TestCloseRacesReserveHost(t *testing.T) {
	for i := range 20 {
		f := &fakeBackend{live: map[uintptr]int{}, inner: NewHostBackend(hostmem.Options{})}
		p, err := New(Options{Backend: f, MinAvailable: -1})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for j := range errs {
			wg.Go(func() { errs[j] = p.Reserve(256<<10, 4) })
		}
		if i%2 == 0 {
			runtime.Gosched()
		}
		p.Close()
		wg.Wait()
		for _, err := range errs {
			if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrBudget) && !errors.Is(err, hostmem.ErrLockLimit) {
				t.Fatalf("Reserve racing Close: %v", err)
			}
		}
		if live, _, _, _ := f.stats(); live != 0 {
			t.Fatalf("round %d: after Close and the Reserves the backend holds %d bytes", i, live)
		}
	}
}

// TestReserveProgressPanics: a progress callback that panics is the
// caller's panic, raised from ReserveContext, but the Reserve keeps no
// claim and gives back what it grew, as a failed Reserve does, and the
// backend is not blamed for it.
func TestReserveProgressPanics(t *testing.T) {
	b := newStepBackend()
	p := newStepPool(t, b, Options{IdleDecay: -1, IdleTimeout: -1})
	func() {
		defer func() {
			if r := recover(); r != "progress failed" {
				t.Fatalf("recovered %v, want the callback's panic", r)
			}
		}()
		p.ReserveContext(context.Background(), 2<<20, 2048, func(made, total int64) { panic("progress failed") })
		t.Fatal("ReserveContext returned though its callback panicked")
	}()
	c, err := p.classFor(2 << 20)
	if err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if r := c.reserved.Load(); r != 0 || st.BytesHeld != 0 || st.BackendPanics != 0 {
		t.Fatalf("after the panic: claim %d, %d bytes held, %d backend panics; want 0, 0, 0", r, st.BytesHeld, st.BackendPanics)
	}
}
