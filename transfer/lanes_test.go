package transfer

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLanesJoin checks that the standing lanes join a staged transfer: with
// lanes spinning, every one of Lanes lanes runs the next transfer, and
// with spinning off at least one other than the caller wakes up and joins.
// The device holds the transfer's copies until the lanes wanted have
// joined, so that the transfer cannot end before them however the lanes
// are scheduled.
func TestLanesJoin(t *testing.T) {
	for _, tc := range []struct {
		spin     time.Duration
		minLanes uint64
	}{
		{time.Second, 4},
		{-1, 2},
	} {
		e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 8 * testChunk, Lanes: 4, DirectBelow: -1, LaneSpin: tc.spin})
		const n = 64 * testChunk
		src := randomBytes(n, 5)
		dev := e.d.alloc(n)
		for i := range 3 {
			before := e.c.stats.lanes.Load()
			if i > 0 { // the first transfer wakes the lanes
				hold := func() {
					spinUntil(func() bool { return e.c.stats.lanes.Load()-before >= tc.minLanes }, -1)
				}
				e.d.hold.Store(&hold)
			}
			if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
				t.Fatal(err)
			}
			e.d.hold.Store(nil)
			if i > 0 {
				if got := e.c.stats.lanes.Load() - before; got < tc.minLanes || got > 4 {
					t.Errorf("LaneSpin %v, transfer %d: %d lanes ran, want %d to 4", tc.spin, i, got, tc.minLanes)
				}
			}
		}
		sameBytes(t, "device", e.devBytes(dev, n), src)
	}
}

// TestLanesStaleOffer checks that a lane offered a transfer whose caller
// has finished drops the offer instead of running a lane of it.
func TestLanesStaleOffer(t *testing.T) {
	l := newStandingLanes(2, -1)
	defer l.stop()
	r := &chunkedRun{} // a lane of it would dereference r.c and panic
	r.closed = true
	l.offer(r, 2)
	deadline := time.Now().Add(5 * time.Second)
	for !l.empty() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !l.empty() {
		t.Fatal("offers not taken")
	}
	// More offers than the queue holds do not block.
	l2 := newStandingLanes(0, -1)
	defer l2.stop()
	done := make(chan struct{})
	go func() { l2.offer(r, 10); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("offer blocked on a full queue")
	}
}

// TestLanesSmallTransfer checks that a staged transfer too small to share
// runs on fewer lanes than Lanes: the plan gives each lane a stripe at
// least, and offers no more lanes than that.
func TestLanesSmallTransfer(t *testing.T) {
	e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 8 * testChunk, Lanes: 8, DirectBelow: -1, LaneSpin: time.Second})
	dev := e.d.alloc(testChunk)
	src := randomBytes(100, 1)
	for range 3 {
		before := e.c.stats.lanes.Load()
		if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
			t.Fatal(err)
		}
		if got := e.c.stats.lanes.Load() - before; got != 1 {
			t.Fatalf("a 100-byte transfer ran on %d lanes, want 1", got)
		}
	}
	sameBytes(t, "device", e.devBytes(dev, 100), src)
}

// TestSpinUntil checks the busy wait: it returns at once when ready, gives
// up after its limit, and waits for ready without one.
func TestSpinUntil(t *testing.T) {
	if !spinUntil(func() bool { return true }, 0) {
		t.Fatal("ready at once: false")
	}
	if spinUntil(func() bool { return false }, 0) {
		t.Fatal("never ready, no spin: true")
	}
	t0 := time.Now()
	if spinUntil(func() bool { return false }, time.Millisecond) || time.Since(t0) < time.Millisecond {
		t.Fatal("never ready: did not spin for its limit")
	}
	calls := 0
	if !spinUntil(func() bool { calls++; return calls == 100 }, -1) || calls != 100 {
		t.Fatalf("no limit: %d calls", calls)
	}
}

// TestSpinUntilYields checks that the busy wait lets other goroutines of
// its processor run: with one processor, it returns once another goroutine
// sets what it waits for, with no limit and with one long enough.
func TestSpinUntilYields(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, limit := range []time.Duration{-1, 10 * time.Second} {
		var set atomic.Bool
		go set.Store(true)
		if !spinUntil(set.Load, limit) {
			t.Fatalf("limit %v: gave up", limit)
		}
	}
}

// TestLanesGapRule checks when a standing lane spins: after a transfer that
// came within LaneSpin of the one before (or overlapped it), not after one
// that came later or after the first, and never with LaneSpin negative.
func TestLanesGapRule(t *testing.T) {
	const spin = 20 * time.Millisecond
	l := newStandingLanes(0, spin)
	defer l.stop()
	if got := l.spinFor(); got != 0 {
		t.Fatalf("before any transfer: spin %v", got)
	}
	l.arrive()
	if got := l.spinFor(); got != 0 {
		t.Fatalf("after the first transfer: spin %v", got)
	}
	l.leave()
	l.arrive() // right after
	if got := l.spinFor(); got != spin {
		t.Fatalf("back to back: spin %v, want %v", got, spin)
	}
	l.arrive() // overlapping
	if got := l.spinFor(); got != spin {
		t.Fatalf("overlapping: spin %v, want %v", got, spin)
	}
	l.leave()
	l.leave()
	time.Sleep(2 * spin)
	l.arrive()
	if got := l.spinFor(); got != 0 {
		t.Fatalf("after a gap longer than LaneSpin: spin %v", got)
	}
	l.leave()
	never := newStandingLanes(0, -1)
	defer never.stop()
	if got := never.spinFor(); got != 0 {
		t.Fatalf("LaneSpin negative: spin %v", got)
	}
}

// TestLanesAsleep checks when a staged transfer finds the standing lanes
// asleep: the first transfer, and one that comes more than LaneSpin after
// the one before; not one that follows within LaneSpin or overlaps
// another; with spinning off, after any gap. A transfer that finds them
// asleep, or whose lanes never spin, does not spin on its lanes' end
// either (endSpinFor).
func TestLanesAsleep(t *testing.T) {
	l := newStandingLanes(1, 50*time.Millisecond)
	defer l.stop()
	step := func(what string, want bool) {
		t.Helper()
		l.arrive()
		if got := l.asleep(); got != want {
			t.Errorf("%s: asleep %v, want %v", what, got, want)
		}
	}
	step("the first transfer", true)
	if got := l.endSpinFor(); got != 0 {
		t.Errorf("the first transfer: its caller spins %v on its lanes' end, want 0", got)
	}
	l.leave()
	step("right after", false)
	if got := l.endSpinFor(); got != endSpin {
		t.Errorf("right after: its caller spins %v on its lanes' end, want %v", got, endSpin)
	}
	step("overlapping", false)
	l.leave()
	l.leave()
	time.Sleep(80 * time.Millisecond)
	step("after a pause longer than LaneSpin", true)
	if got := l.endSpinFor(); got != 0 {
		t.Errorf("after a pause: its caller spins %v on its lanes' end, want 0", got)
	}
	l.leave()

	never := newStandingLanes(1, -1)
	defer never.stop()
	never.arrive()
	never.leave()
	time.Sleep(time.Millisecond)
	never.arrive()
	if !never.asleep() {
		t.Error("spinning off: lanes awake after a gap")
	}
	if got := never.endSpinFor(); got != 0 {
		t.Errorf("spinning off: the caller spins %v on its lanes' end", got)
	}
	never.leave()
}

// TestLanesFewWhenAsleep checks the rule end to end on the fake device: a
// cooperative transfer after a pause longer than LaneSpin, either way, runs
// on at most its direction's tuning.coldLanes (how many join of those offered depends
// on the scheduler; more than offered never do), while the plan of the same
// transfer back to back offers all of them; every byte arrives.
func TestLanesFewWhenAsleep(t *testing.T) {
	const lanes = 8
	cold := defaultTuning().coldLanes
	e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 32 * testChunk, Lanes: lanes, DirectBelow: -1, LaneSpin: 20 * time.Millisecond})
	e.d.latency.Store(int64(50 * time.Microsecond))
	n := 16 * testChunk // 16 stripes
	for _, tc := range []struct {
		dir    Direction
		asleep bool
		want   int
	}{
		{HostToDevice, true, cold[HostToDevice]},
		{HostToDevice, false, lanes},
		{DeviceToHost, true, cold[DeviceToHost]},
		{DeviceToHost, false, lanes},
	} {
		if p := planStaging(n, tc.dir, 1, tc.asleep, e.c.opt, e.c.tune); p.mode != cooperative || p.lanes != tc.want {
			t.Fatalf("%v, asleep %v: plan %+v, want cooperative on %d lanes", tc.dir, tc.asleep, p, tc.want)
		}
	}
	src := randomBytes(n, 9)
	dev := e.d.alloc(n)
	for range 3 {
		time.Sleep(60 * time.Millisecond)
		before := e.c.stats.lanes.Load()
		if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
			t.Fatal(err)
		}
		if got := e.c.stats.lanes.Load() - before; got > uint64(cold[HostToDevice]) {
			t.Errorf("after a pause: %d lanes ran, want at most %d", got, cold[HostToDevice])
		}
		sameBytes(t, "device", e.devBytes(dev, n), src)
		time.Sleep(60 * time.Millisecond)
		before = e.c.stats.lanes.Load()
		back := make([]byte, n)
		if err := e.c.FromDevice(context.Background(), back, dev); err != nil {
			t.Fatal(err)
		}
		if got := e.c.stats.lanes.Load() - before; got > uint64(cold[DeviceToHost]) {
			t.Errorf("a download after a pause: %d lanes ran, want at most %d", got, cold[DeviceToHost])
		}
		sameBytes(t, "back", back, src)
	}
}

// empty reports whether no offer is on the board.
func (b *offerBoard) empty() bool {
	for i := range b.slots {
		if b.slots[i].Load() != nil {
			return false
		}
	}
	return true
}

// markJob counts the lanes that took it; each waits in join until
// release is closed.
type markJob struct {
	joined  atomic.Int32
	release chan struct{}
}

func (m *markJob) join() {
	m.joined.Add(1)
	<-m.release
}

// TestOfferBoard checks the board alone: an offer to n lanes is taken n
// times and then frees its slot; a full board refuses an offer; a
// withdrawn offer is taken no more, the others still are; and
// offers put and taken from many goroutines at once are each taken
// exactly as often as they asked, never more.
func TestOfferBoard(t *testing.T) {
	b := offerBoard{make([]atomic.Pointer[boardOffer], 4)}
	j := &markJob{}
	if !b.put(j, 3) {
		t.Fatal("put on an empty board failed")
	}
	for i := range 3 {
		if got := b.take(); got != j {
			t.Fatalf("take %d: %v, want the offer", i, got)
		}
	}
	if got := b.take(); got != nil || !b.empty() {
		t.Fatalf("after three takes of an offer to three: take %v, board empty %v", got, b.empty())
	}
	for i := range len(b.slots) {
		if !b.put(j, 1) {
			t.Fatalf("put %d failed with free slots", i)
		}
	}
	if b.put(j, 1) {
		t.Fatal("put on a full board succeeded")
	}
	for b.take() != nil {
	}
	other := &markJob{}
	b.put(j, 2)
	b.put(other, 1)
	b.withdraw(j)
	if got := b.take(); got != other {
		t.Fatalf("after withdrawing an offer: take %v, want the other offer", got)
	}
	if !b.empty() {
		t.Fatal("board not empty after the withdrawal and the other offer's take")
	}

	const producers, consumers, offers = 4, 8, 2000
	type tally struct {
		want  int32
		taken atomic.Int32
	}
	jobs := make(map[job]*tally)
	var mu sync.Mutex
	var done atomic.Bool
	var wg sync.WaitGroup
	for range consumers {
		wg.Go(func() {
			for {
				if j := b.take(); j != nil {
					mu.Lock()
					tl := jobs[j]
					mu.Unlock()
					tl.taken.Add(1)
					continue
				}
				if done.Load() && b.empty() {
					return
				}
				runtime.Gosched()
			}
		})
	}
	var pw sync.WaitGroup
	for p := range producers {
		pw.Go(func() {
			for i := range offers / producers {
				j := &markJob{}
				tl := &tally{want: int32(1 + (p+i)%5)}
				mu.Lock()
				jobs[j] = tl
				mu.Unlock()
				for !b.put(j, int(tl.want)) {
					runtime.Gosched()
				}
			}
		})
	}
	pw.Wait()
	done.Store(true)
	wg.Wait()
	for _, tl := range jobs {
		if got := tl.taken.Load(); got != tl.want {
			t.Fatalf("an offer to %d lanes was taken %d times", tl.want, got)
		}
	}
}

// TestLanesNoLostWakeup offers jobs to lanes that never spin, again and
// again, while they go back to sleep from the last one: every offer must
// wake as many lanes as it asked for. An offer published while a lane is
// between its last look and its sleep is the race this tries to lose.
func TestLanesNoLostWakeup(t *testing.T) {
	const lanes, rounds = 3, 2000
	var looks atomic.Int64
	testHookBeforeSleep = func() {
		// Every other lane waits a little between its last look and its
		// sleep, where an offer may come.
		if looks.Add(1)%2 == 0 {
			time.Sleep(20 * time.Microsecond)
		}
	}
	l := newStandingLanes(lanes, -1)
	defer func() {
		l.stop()
		testHookBeforeSleep = nil
	}()
	for i := range rounds {
		m := &markJob{release: make(chan struct{})}
		l.offer(m, lanes)
		deadline := time.Now().Add(5 * time.Second)
		for m.joined.Load() < lanes {
			if time.Now().After(deadline) {
				close(m.release) // let the lanes that joined go, for stop
				t.Fatalf("round %d: %d of %d lanes joined after 5 s", i, m.joined.Load(), lanes)
			}
			runtime.Gosched()
		}
		close(m.release)
		if i%7 == 0 {
			time.Sleep(time.Duration(i%50) * time.Microsecond)
		}
	}
}
