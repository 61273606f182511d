package pinpool

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinpool/pinpool/hostmem"
)

// fakeMem is a headroom the tests set: the system's MemAvailable and a
// cgroup limit with its headroom.
type fakeMem struct {
	avail, cgLimit, cgRoom atomic.Int64
	looks                  atomic.Int64
}

func (m *fakeMem) install(p *Pool) {
	var l memLook = func() memView {
		m.looks.Add(1)
		v := memView{avail: m.avail.Load()}
		if lim := m.cgLimit.Load(); lim > 0 {
			v.cg = cgroupView{limit: lim, room: m.cgRoom.Load(), mem: hostmem.CgroupMemory{
				Version: 2, Path: "/sys/fs/cgroup/test.slice/app", Limit: lim, LimitFile: "memory.max", Usage: lim - m.cgRoom.Load(),
			}}
		}
		return v
	}
	p.core.guard.look.Store(&l)
}

// TestPressureFreesIdle checks the fourth goal: when the headroom falls
// below MinAvailable, whoever took the memory, the pool frees its idle
// memory promptly (the janitor looks every pressureTickFar while the
// headroom is far above the floor), sparing what Reserve keeps, and
// refuses to grow until the headroom is back.
func TestPressureFreesIdle(t *testing.T) {
	const floor = 1 << 30
	p, f := newTestPool(t, Options{MinAvailable: floor, IdleDecay: -1, IdleTimeout: -1})
	var m fakeMem
	m.avail.Store(100 << 30)
	m.install(p)
	if err := p.Reserve(64<<10, 4); err != nil {
		t.Fatal(err)
	}
	burst(t, p, []int{frame}, 0, 10, 1, 0)
	if st := p.Stats(); st.Trims != 0 {
		t.Fatalf("freed %d allocations with plenty of headroom", st.Trims)
	}
	start := time.Now()
	m.avail.Store(floor / 2)
	waitFor(t, "idle frames freed under pressure", func() bool {
		for _, c := range p.Stats().Classes {
			if c.Size >= frame && c.BuffersHeld != 0 {
				return false
			}
		}
		return true
	})
	t.Logf("idle memory freed %v after the headroom fell from far above the floor (the janitor looked every %v)", time.Since(start), pressureTickFar)
	st := p.Stats()
	if st.TrimsBy.Of(TrimPressure) == 0 {
		t.Fatalf("trims by reason %v: none counted as pressure", st.TrimsBy)
	}
	for _, c := range st.Classes {
		if c.Size == 64<<10 && c.Idle < 4 {
			t.Fatalf("pressure freed reserved buffers: %d idle", c.Idle)
		}
	}
	if _, err := p.TryGet(frame); !errors.Is(err, ErrLowMemory) || !errors.Is(err, ErrBudget) {
		t.Fatalf("TryGet under pressure: %v, want ErrLowMemory (and ErrBudget)", err)
	}
	// A Get waits for the headroom to come back, looking again.
	go func() {
		time.Sleep(50 * time.Millisecond)
		m.avail.Store(100 << 30)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := p.Get(ctx, frame)
	if err != nil {
		t.Fatalf("Get once the headroom is back: %v", err)
	}
	b.Release()
	if live, _, _, _ := f.stats(); live == 0 {
		t.Fatal("nothing held after the Get")
	}
}

// TestPressureLooksByMargin checks how often the janitor of a pool that
// holds memory looks at the headroom: every pressureTickFar while it is
// more than nearFloor times the floor, every pressureTick once it is
// within that (and so below the floor, within pressureTick of the fall).
func TestPressureLooksByMargin(t *testing.T) {
	const floor = 1 << 30
	p, _ := newTestPool(t, Options{MinAvailable: floor, IdleDecay: -1, IdleTimeout: -1})
	var m fakeMem
	m.avail.Store(100 << 30)
	m.install(p)
	if err := p.Reserve(64<<10, 4); err != nil {
		t.Fatal(err)
	}
	looks := func(d time.Duration) int64 {
		n := m.looks.Load()
		time.Sleep(d)
		return m.looks.Load() - n
	}
	const span = 1100 * time.Millisecond
	if n, most := looks(span), int64(span/pressureTickFar)+1; n > most {
		t.Errorf("far from the floor: %d looks in %v, want at most %d", n, span, most)
	}
	m.avail.Store(3 * floor) // near, not below
	time.Sleep(pressureTickFar + pressureTick)
	if n, least := looks(span), int64(span/pressureTick)/2; n < least {
		t.Errorf("near the floor: %d looks in %v, want at least %d", n, span, least)
	}
}

// TestPressureIdlePoolLooksNot checks that a pool holding nothing does
// not read the headroom in the background.
func TestPressureIdlePoolLooksNot(t *testing.T) {
	p, _ := newTestPool(t, Options{MinAvailable: 1 << 30})
	var m fakeMem
	m.avail.Store(100 << 30)
	m.install(p)
	time.Sleep(5 * pressureTick)
	if n := m.looks.Load(); n != 0 {
		t.Fatalf("an empty pool looked at the headroom %d times", n)
	}
}

// TestCgroupLimitRefusesGrowth checks the third goal: growth that would
// cross the cgroup's limit is refused like an over-budget request (TryGet
// fails, Get waits), with one sentence that names the group, its limit and
// the fix; even with the system guard off.
func TestCgroupLimitRefusesGrowth(t *testing.T) {
	for _, tc := range []struct {
		name         string
		minAvailable int64
		floor        int64
	}{
		{"guard off: the limit itself", -1, 0},
		{"default floor: 3% of the limit", 0, (1 << 30) / 100 * 3},
		{"MinAvailable", 8 << 20, 8 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			p, err := New(Options{Backend: f, MinAvailable: tc.minAvailable, SlabMax: -1, GrowCount: 1, IdleDecay: -1, IdleTimeout: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var m fakeMem
			m.avail.Store(-1) // the system's headroom unknown: the cgroup alone
			m.cgLimit.Store(1 << 30)
			m.cgRoom.Store(1 << 30)
			m.install(p)
			b := mustGet(t, p, 1<<20)
			b.Release()
			need := int64(1 << 20)
			m.cgRoom.Store(tc.floor + need - 1) // one byte short
			hold := mustGet(t, p, 1<<20)        // the idle one: no growth
			_, err = p.TryGet(1 << 20)
			var ce *cgroupLimitError
			if !errors.As(err, &ce) || !errors.Is(err, ErrBudget) || !errors.Is(err, ErrLowMemory) {
				t.Fatalf("TryGet one byte over the cgroup's room: %v, want a cgroup limit error (ErrBudget, ErrLowMemory)", err)
			}
			msg := err.Error()
			for _, want := range []string{"/sys/fs/cgroup/test.slice/app", "memory.max", "memory limit"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not mention %q", msg, want)
				}
			}
			if st := p.Stats(); st.LowMemoryRefusals == 0 {
				t.Error("refusal not counted in LowMemoryRefusals")
			}
			m.cgRoom.Store(tc.floor + need)
			if b, err = p.TryGet(1 << 20); err != nil {
				t.Fatalf("TryGet with exactly the room: %v", err)
			}
			b.Release()
			hold.Release()
		})
	}
}

// BenchmarkGuardLook measures one look of the memory guard at this
// machine (/proc/meminfo and the cgroup's files): the janitor takes one
// every pressureTick while the pool holds memory, so its CPU share is
// ns/op × 20 per second.
func BenchmarkGuardLook(b *testing.B) {
	look := systemLook(true)
	for b.Loop() {
		look()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*float64(time.Second/pressureTick)/1e9*100, "%core-at-20Hz")
}

// TestCgroupLimitTooSmall checks that a Get larger than the cgroup's whole
// limit fails at once instead of waiting for room that cannot come.
func TestCgroupLimitTooSmall(t *testing.T) {
	p, _ := newTestPool(t, Options{SlabMax: -1, GrowCount: 1})
	var m fakeMem
	m.avail.Store(-1)
	m.cgLimit.Store(2 << 20)
	m.cgRoom.Store(2 << 20)
	m.install(p)
	done := make(chan error, 1)
	go func() {
		_, err := p.Get(context.Background(), 4<<20)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrLowMemory) || !strings.Contains(err.Error(), "at once is more than") {
			t.Fatalf("Get of 4 MiB under a 2 MiB cgroup: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Get of 4 MiB under a 2 MiB cgroup waits for room that cannot come")
	}
}
