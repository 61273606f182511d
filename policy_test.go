package pinpool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// burst holds hold buffers of each size, then releases them down to low
// of each, cycles times with pause between the phases. It returns the
// buffers still held (low of each size), which the caller releases.
func burst(t testing.TB, p *Pool, sizes []int, low, hold, cycles int, pause time.Duration) {
	t.Helper()
	burstThen(t, p, sizes, low, hold, cycles, pause, nil)
}

// burstThen is burst, calling then (when not nil) after every release
// phase.
func burstThen(t testing.TB, p *Pool, sizes []int, low, hold, cycles int, pause time.Duration, then func()) {
	t.Helper()
	held := make([][]Buffer, len(sizes))
	for c := range cycles {
		for i, n := range sizes {
			for len(held[i]) < hold {
				b, err := p.Get(context.Background(), n)
				if err != nil {
					t.Fatalf("cycle %d: Get(%d): %v", c, n, err)
				}
				held[i] = append(held[i], b)
			}
		}
		time.Sleep(pause)
		for i := range sizes {
			for len(held[i]) > low {
				last := len(held[i]) - 1
				if err := held[i][last].Release(); err != nil {
					t.Fatal(err)
				}
				held[i] = held[i][:last]
			}
		}
		if then != nil {
			then()
		}
		time.Sleep(pause)
	}
	for i := range held {
		for _, b := range held[i] {
			b.Release()
		}
	}
}

// TestBurstDoesNotStorm checks the first goal of the idle policy: at the
// default options, a load that breathes (0→45→0 or 20→45→20 frames, and
// frames with 64 KiB and 16 MiB buffers) allocates only while it warms up:
// once every size has reached its peak, no cycle allocates or frees again.
// With the seed's cap trimmed at once, every cycle freed the 13 frames
// above 32 and allocated them again (98 growths a second on the host).
func TestBurstDoesNotStorm(t *testing.T) {
	pauses := []time.Duration{0, time.Millisecond, 20 * time.Millisecond}
	if soak() {
		pauses = append(pauses, 100*time.Millisecond)
	}
	for _, tc := range burstWorkloads { // BenchmarkBurst's
		for _, pause := range pauses {
			t.Run(fmt.Sprintf("%s/pause=%v", tc.name, pause), func(t *testing.T) {
				p, f := newTestPool(t, Options{})
				burst(t, p, tc.sizes, tc.low, tc.hold, 1, 0) // warm-up
				warm := p.Stats()
				_, _, allocs, frees := f.stats()
				cycles := max(3, min(100, int(400*time.Millisecond/(2*pause+time.Millisecond))))
				burst(t, p, tc.sizes, tc.low, tc.hold, cycles, pause)
				st := p.Stats()
				_, _, allocs2, frees2 := f.stats()
				if st.Grows != warm.Grows || allocs2 != allocs || frees2 != frees {
					t.Fatalf("%d cycles after warm-up: %d growths, %d backend allocations and %d frees (trims %v)",
						cycles, st.Grows-warm.Grows, allocs2-allocs, frees2-frees, st.TrimsBy)
				}
				if st.Misses != warm.Misses {
					t.Fatalf("%d misses after warm-up", st.Misses-warm.Misses)
				}
			})
		}
	}
}

// TestDecayGivesBack checks the second goal: once a load stops, idle
// memory above MaxIdle is not freed at once, but within the decay time
// (plus the janitor's tick), by decay; at rest at most MaxIdle stay idle.
func TestDecayGivesBack(t *testing.T) {
	const decay = 200 * time.Millisecond
	p, f := newTestPool(t, Options{MaxIdle: 5, GrowCount: 4, IdleDecay: decay})
	start := time.Now()
	burst(t, p, []int{frame}, 0, 40, 1, 0)
	time.Sleep(decay / 4)
	if st := p.Stats(); st.Trims != 0 && time.Since(start) < decay {
		t.Fatalf("freed %d allocations %v after the load stopped, before the decay time %v", st.Trims, time.Since(start), decay)
	}
	size := p.Stats().Classes[0].Size
	waitFor(t, "idle buffers and their memory down to MaxIdle", func() bool {
		live, _, _, _ := f.stats()
		return p.Stats().Classes[0].Idle <= 5 && live <= 5*size
	})
	if took := time.Since(start); took < decay {
		t.Fatalf("idle memory freed after %v, before the decay time %v", took, decay)
	}
	st := p.Stats()
	if st.TrimsBy.Of(TrimDecay) == 0 || st.TrimsBy.Sum() != st.Trims {
		t.Fatalf("trims %d, by reason %v", st.Trims, st.TrimsBy)
	}
}

// TestDecaySteadyLoadKeepsMemory checks that under a steady load nothing
// it uses is freed by decay, even with a short decay time.
func TestDecaySteadyLoadKeepsMemory(t *testing.T) {
	// The decay time is short, but long against the load's 2 ms pauses
	// even when the test goroutine runs late on a loaded machine.
	p, _ := newTestPool(t, Options{MaxIdle: 1, IdleDecay: time.Second})
	burst(t, p, []int{frame}, 0, 8, 1, 0)
	warm := p.Stats()
	stop := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(stop) {
		burst(t, p, []int{frame}, 0, 8, 1, 2*time.Millisecond)
	}
	// The warm-up's batches overshoot (4 then 8): decay may free what
	// the load never used, but nothing it uses is freed and regrown.
	if st := p.Stats(); st.Grows != warm.Grows || st.Classes[0].BuffersHeld < 8 {
		t.Fatalf("steady load: %d growths after warm-up, %d buffers held", st.Grows-warm.Grows, st.Classes[0].BuffersHeld)
	}
}

// TestDecayAdapts checks that a class whose load comes back just after a
// decay free doubles its decay time, so that the next gap of the same
// length frees nothing. The decay time is long against the test's own
// steps, so that a goroutine that runs late on a loaded machine (the
// second burst after the free, the end of the sleep) still lands inside
// the window it means: within the old decay time after the free, between
// the old and the new decay time after the load.
func TestDecayAdapts(t *testing.T) {
	const decay = 400 * time.Millisecond
	p, _ := newTestPool(t, Options{MaxIdle: 1, IdleDecay: decay, IdleTimeout: time.Minute})
	burst(t, p, []int{frame}, 0, 8, 1, 0)
	waitFor(t, "a decay free", func() bool { return p.Stats().TrimsBy.Of(TrimDecay) > 0 })
	burst(t, p, []int{frame}, 0, 8, 1, 0) // the load comes back: regrowth
	if d := p.Stats().Classes[0].IdleDecay; d != 2*decay {
		t.Fatalf("decay time after a regrowth within it: %v, want %v", d, 2*decay)
	}
	before := p.Stats()
	time.Sleep(decay + decay/4) // longer than the old decay, shorter than the new
	burst(t, p, []int{frame}, 0, 8, 1, 0)
	if st := p.Stats(); st.Grows != before.Grows {
		t.Fatalf("a gap shorter than the adapted decay time regrew %d times", st.Grows-before.Grows)
	}
}

// TestIdleDecayOff checks that a negative IdleDecay frees nothing by decay.
func TestIdleDecayOff(t *testing.T) {
	p, _ := newTestPool(t, Options{MaxIdle: 1, IdleDecay: -1})
	burst(t, p, []int{frame}, 0, 8, 1, 0)
	time.Sleep(100 * time.Millisecond)
	if st := p.Stats(); st.Trims != 0 || st.Classes[0].Idle < 8 {
		t.Fatalf("IdleDecay -1: %d trims, %d idle", st.Trims, st.Classes[0].Idle)
	}
}

// TestBudgetPhasesSettle checks that two sizes taking turns under a budget
// stop allocating once both have warmed up: growth under a budget takes no
// more than the room left, so one phase does not evict the other's memory.
// Before, 32 buffers of 1 MiB then 9 of 8 MiB under 128 MiB, 30 rounds,
// made 165 backend allocations and 165 frees.
func TestBudgetPhasesSettle(t *testing.T) {
	p, f := newTestPool(t, Options{Budget: 128 << 20})
	round := func() {
		burst(t, p, []int{1 << 20}, 0, 32, 1, 0)
		burst(t, p, []int{8 << 20}, 0, 9, 1, 0)
	}
	for range 3 {
		round()
	}
	_, _, allocs, frees := f.stats()
	for range 27 {
		round()
	}
	st := p.Stats()
	if _, _, a, fr := f.stats(); a != allocs || fr != frees {
		t.Fatalf("27 rounds after warm-up: %d allocations, %d frees (trims %v)", a-allocs, fr-frees, st.TrimsBy)
	}
	if st.BytesHeld > 128<<20 || st.PeakHeld > 128<<20 {
		t.Fatalf("held %d, peak %d over the budget", st.BytesHeld, st.PeakHeld)
	}
}

// TestFailedReserveLeavesRoom checks that a Reserve the budget refuses
// keeps no claim on memory: the pool goes on serving what fits.
func TestFailedReserveLeavesRoom(t *testing.T) {
	t.Run("never fits", func(t *testing.T) {
		p, f := newTestPool(t, Options{Budget: 64 << 20})
		if err := p.Reserve(8<<20, 100); !errors.Is(err, ErrBudget) {
			t.Fatalf("Reserve(8 MiB, 100) under 64 MiB: %v, want ErrBudget", err)
		}
		if _, _, allocs, _ := f.stats(); allocs != 0 {
			t.Fatalf("a Reserve that could never fit allocated %d times", allocs)
		}
		b, err := p.TryGet(64 << 10)
		if err != nil {
			t.Fatalf("64 KiB after a refused Reserve: %v", err)
		}
		b.Release()
	})
	t.Run("runs out", func(t *testing.T) {
		p, _ := newTestPool(t, Options{Budget: 64 << 20})
		hold := mustGet(t, p, 16<<20) // leaves room for 6 of 8 MiB
		if err := p.Reserve(8<<20, 7); !errors.Is(err, ErrBudget) {
			t.Fatalf("Reserve(8 MiB, 7) with 48 MiB of room: %v, want ErrBudget", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		b, err := p.Get(ctx, 16<<20)
		if err != nil {
			t.Fatalf("16 MiB after a failed Reserve, with its idle memory free to take: %v", err)
		}
		b.Release()
		hold.Release()
	})
}

// TestTrimReasons checks that every free is counted under its reason and
// that the counts add up to Trims.
func TestTrimReasons(t *testing.T) {
	p, f := newTestPool(t, Options{Budget: 32 << 20, IdleDecay: -1, IdleTimeout: -1})
	b := mustGet(t, p, 16<<20)
	b.Release()
	b = mustGet(t, p, 24<<20) // evicts the idle 16 MiB: cap
	b.Release()
	if n := p.Stats().TrimsBy.Of(TrimCap); n != 1 {
		t.Fatalf("cap trims %d, want 1", n)
	}
	p.Trim()
	if n := p.Stats().TrimsBy.Of(TrimExplicit); n != 1 {
		t.Fatalf("explicit trims %d, want 1", n)
	}
	b = mustGet(t, p, 8<<20)
	b.Release()
	p.Close()
	st := p.Stats()
	if st.TrimsBy.Of(TrimClose) != 1 || st.TrimsBy.Sum() != st.Trims {
		t.Fatalf("after Close: trims %d, by reason %v", st.Trims, st.TrimsBy)
	}
	if _, _, allocs, frees := f.stats(); uint64(allocs) != st.Grows || uint64(frees) != st.Trims {
		t.Fatalf("backend: %d allocations, %d frees; stats: %d grows, %d trims", allocs, frees, st.Grows, st.Trims)
	}
	for _, r := range TrimReasons() {
		if r.String() == "unknown" {
			t.Fatalf("reason %d has no name", r)
		}
	}
	if TrimReason(-1).String() != "unknown" || st.TrimsBy.Of(numTrimReasons) != 0 {
		t.Fatal("an out-of-range reason is not unknown")
	}
}

// TestAdvPolicyRacesClose races the whole idle policy against Close: decay
// and idle timeout at the janitor's shortest tick, pressure switching on
// and off every millisecond, Trim, Stats sampled all along (every snapshot
// consistent, no counter going back), and Close at a random moment. After
// the last release nothing is left with the backend.
func TestAdvPolicyRacesClose(t *testing.T) {
	iters := advN(40, 8)
	sizes := []int{4096, 65536, 1 << 20, frame}
	var errs errList
	for it := range iters {
		p, fb := newFaultPoolNoCleanup(t, Options{Budget: 64 << 20, MinAvailable: 1 << 30, MaxIdle: 1, IdleDecay: time.Millisecond, IdleTimeout: 3 * time.Millisecond})
		var m fakeMem
		m.avail.Store(100 << 30)
		m.install(p)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { // pressure on and off
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				m.avail.Store(int64(100<<30) >> (i % 2 * 8)) // 100 GiB, then 400 MiB
			}
		})
		for g := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(it), uint64(g)))
				for {
					select {
					case <-stop:
						return
					default:
					}
					n := sizes[rng.IntN(len(sizes))]
					var held []Buffer
					for range 1 + rng.IntN(6) {
						b, err := p.TryGet(n)
						if err == nil {
							held = append(held, b)
						} else if !isOneOf(err, ErrBudget, ErrClosed) {
							errs.add("TryGet(%d): %v", n, err)
						}
					}
					if rng.IntN(8) == 0 {
						p.Trim()
					}
					for _, b := range held {
						if err := b.Release(); err != nil {
							errs.add("Release: %v", err)
						}
					}
				}
			})
		}
		wg.Go(func() {
			prev := p.Stats()
			for {
				select {
				case <-stop:
					return
				default:
				}
				st := p.Stats()
				for _, s := range advCheckSnapshot(st) {
					errs.add("%s", s)
				}
				now := advCounters(st)
				for k, v := range advCounters(prev) {
					if now[k] < v {
						errs.add("%s went back: %d then %d", k, v, now[k])
					}
				}
				prev = st
			}
		})
		time.Sleep(time.Duration(1+it%7) * time.Millisecond)
		if err := p.Close(); err != nil {
			errs.add("Close: %v", err)
		}
		close(stop)
		wg.Wait()
		fb.waitReleased(t, "after Close and the last release")
		fb.check(t)
		st := p.Stats()
		if st.BytesHeld != 0 || st.TrimsBy.Sum() != st.Trims {
			errs.add("after Close: held %d, trims %d by reason %v", st.BytesHeld, st.Trims, st.TrimsBy)
		}
	}
	errs.report(t)
}

// TestDecayLimits checks the decay arithmetic at its edges: the longest
// decay a class adapts to, and the doubling, never overflow.
func TestDecayLimits(t *testing.T) {
	for _, tc := range []struct {
		decay, timeout, want time.Duration
	}{
		{5 * time.Second, 30 * time.Second, 30 * time.Second},
		{time.Hour, time.Millisecond, time.Hour},
		{time.Second, -1, 16 * time.Second},
		{math.MaxInt64, -1, math.MaxInt64},
		{math.MaxInt64 / 16, -1, math.MaxInt64 / 16 * 16},
	} {
		o := Options{IdleDecay: tc.decay, IdleTimeout: tc.timeout}
		if got := o.maxDecay(); got != tc.want {
			t.Errorf("maxDecay(%v, %v) = %v, want %v", tc.decay, tc.timeout, got, tc.want)
		}
		if tick := o.idleTick(); tick < 10*time.Millisecond || tick > time.Second {
			t.Errorf("idleTick(%v, %v) = %v", tc.decay, tc.timeout, tick)
		}
	}
	for _, tc := range []struct {
		d, max, want int64
	}{
		{1, 10, 2}, {5, 10, 10}, {6, 10, 10}, {10, 10, 10},
		{math.MaxInt64 - 1, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64 / 2, math.MaxInt64, math.MaxInt64 - 1},
	} {
		c := &class{}
		c.decay.Store(tc.d)
		c.decayed.Store(100)
		c.regrown(100, time.Duration(tc.max))
		if got := c.decay.Load(); got != tc.want {
			t.Errorf("regrown with decay %d, max %d: %d, want %d", tc.d, tc.max, got, tc.want)
		}
	}
}
