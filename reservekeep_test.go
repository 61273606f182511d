package pinpool

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// TestReserveSurvivesDecay checks that decay frees down to MaxIdle but
// never below what Reserve asked to keep, whatever allocations the
// buffers came from: after Reserve(4 MiB, 3) and 9 buffers used and
// released, the class holds 12 idle buffers in two allocations (4 + 8),
// and freeing the larger one would leave none.
func TestReserveSurvivesDecay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxIdle int
		used    int
	}{
		{"MaxIdle 1, 9 used", 1, 9},
		{"MaxIdle 2, 9 used", 2, 9},
		{"MaxIdle 1, 20 used", 1, 20},
		{"MaxIdle 1, 3 used", 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newTestPool(t, Options{MaxIdle: tc.maxIdle, IdleDecay: time.Hour, IdleTimeout: -1})
			const size = 4 << 20
			if err := p.Reserve(size, 3); err != nil {
				t.Fatal(err)
			}
			bufs := make([]Buffer, tc.used)
			for i := range bufs {
				bufs[i] = mustGet(t, p, size)
			}
			for _, b := range bufs {
				b.Release()
			}
			c, _ := p.classFor(size)
			// Age the class by hand, past its decay time: the janitor's own
			// ticks (an hour apart) play no part.
			now := time.Now()
			p.ageIdle(now)
			p.ageIdle(now.Add(2 * time.Hour))
			p.ageIdle(now.Add(4 * time.Hour))
			if idle := c.idleCount(); idle < 3 {
				t.Fatalf("after decay %d buffers are idle, Reserve asked to keep 3", idle)
			}
		})
	}
}

// TestReserveSurvivesIdleTimeout is the same through IdleTimeout.
func TestReserveSurvivesIdleTimeout(t *testing.T) {
	p, _ := newTestPool(t, Options{MaxIdle: -1, IdleDecay: -1, IdleTimeout: time.Hour})
	const size = 4 << 20
	if err := p.Reserve(size, 3); err != nil {
		t.Fatal(err)
	}
	bufs := make([]Buffer, 9)
	for i := range bufs {
		bufs[i] = mustGet(t, p, size)
	}
	for _, b := range bufs {
		b.Release()
	}
	c, _ := p.classFor(size)
	now := time.Now()
	p.ageIdle(now)
	p.ageIdle(now.Add(2 * time.Hour))
	if idle := c.idleCount(); idle < 3 {
		t.Fatalf("after IdleTimeout %d buffers are idle, Reserve asked to keep 3", idle)
	}
}

// gateBackend fails every Alloc, each only once the test lets it go, so
// that Reserves can be made to overlap in a chosen order.
type gateBackend struct {
	enter chan int      // an Alloc of this size began
	gate  chan struct{} // one receive lets one Alloc fail
}

func (g *gateBackend) Name() string { return "gate" }

func (g *gateBackend) Alloc(size int) (Allocation, error) {
	g.enter <- size
	<-g.gate
	return nil, errInjected
}

// TestFailedReservesKeepNoClaim checks that Reserves of one size that fail
// while they overlap leave no claim behind, whatever order they fail in.
func TestFailedReservesKeepNoClaim(t *testing.T) {
	for _, tc := range []struct {
		name         string
		first, later int // counts: the first Reserve is in its Alloc when the later one claims
	}{
		{"3 then 6", 3, 6},
		{"6 then 3", 6, 3},
		{"6 then 6", 6, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gateBackend{enter: make(chan int), gate: make(chan struct{})}
			p, err := New(Options{Backend: g, MinAvailable: -1, IdleDecay: -1, IdleTimeout: -1, GrowCount: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			const size = 4 << 20
			c, _ := p.classFor(size)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			wg.Go(func() { errs[0] = p.Reserve(size, tc.first) })
			<-g.enter // the first holds the class's growth
			wg.Go(func() { errs[1] = p.Reserve(size, tc.later) })
			// The later Reserve has made its claim once the class keeps
			// its count (it then waits for the growth in flight).
			for c.reserved.Load() < int64(max(tc.first, tc.later)) {
				time.Sleep(time.Millisecond)
			}
			go func() {
				for range g.enter {
					g.gate <- struct{}{}
				}
			}()
			g.gate <- struct{}{}
			wg.Wait()
			close(g.enter)
			for i, err := range errs {
				if !errors.Is(err, ErrGrow) {
					t.Fatalf("Reserve %d: %v, want ErrGrow", i, err)
				}
			}
			if r := c.reserved.Load(); r != 0 {
				t.Fatalf("after both Reserves failed the class keeps a claim of %d", r)
			}
		})
	}
}

// TestReserveClaimOutlivesFailure checks that a Reserve that failed takes
// away no claim of one that succeeded.
func TestReserveClaimOutlivesFailure(t *testing.T) {
	f := newFaultBackend()
	p, _ := newTestPool(t, Options{Backend: f, IdleDecay: -1, IdleTimeout: -1})
	const size = 4 << 20
	if err := p.Reserve(size, 2); err != nil {
		t.Fatal(err)
	}
	f.failEvery.Store(1)
	if err := p.Reserve(size, 8); err == nil {
		t.Fatal("Reserve with a failing backend succeeded")
	}
	f.failEvery.Store(0)
	c, _ := p.classFor(size)
	if r := c.reserved.Load(); r != 2 {
		t.Fatalf("after a failed Reserve(8) the class keeps %d, want the 2 of the Reserve that succeeded", r)
	}
}
