package transfer

import (
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Waking a sleeping lane costs a thread wake-up, a large part of a small transfer's time; a
// spinning one joins at once but burns its processor. So a lane spins for Options.LaneSpin before
// it sleeps, but only after a transfer that came within LaneSpin of the one before (the gap rule):
// back-to-back transfers keep the lanes awake, a paced stream pays no spin. Sleeping lanes join a
// wake-up apart (the runtime wakes idle threads in a chain); lanes on raw futexes, a goroutine
// readied after them, or a caller yielding to them saved too little (BenchmarkPacedFrames).

// standingLanes are Lanes-1 goroutines that join staged transfers of one direction; each direction
// has its own set (Copier.lanes), so that a transfer neither waits for lanes busy the other way nor
// splits its lanes with it.
type standingLanes struct {
	offerBoard               // the offers, taken without a lock
	wake       chan struct{} // a token per sleeping lane an offer needs; closed by stop
	sleeping   atomic.Int32  // lanes asleep in next, or about to be
	spin       time.Duration
	quitting   atomic.Bool // set by stop
	wg         sync.WaitGroup

	// The gap rule: transfers running, the last one's end, the latest one's gap (ns since epoch).
	active  atomic.Int32
	lastEnd atomic.Int64
	lastGap atomic.Int64
}

// epoch is the origin of standingLanes' clock (monotonic).
var epoch = time.Now()

// arrive notes the start of a staged transfer (the gap since the last one ended, zero when another
// is running) and returns the number running, this one included.
func (l *standingLanes) arrive() int {
	gap := int64(0)
	active := l.active.Add(1)
	if active == 1 {
		gap = int64(time.Since(epoch)) - l.lastEnd.Load()
	}
	l.lastGap.Store(gap)
	return int(active)
}

// asleep reports whether the latest transfer found the lanes asleep: it came more than LaneSpin
// after the one before (after any gap when lanes never spin).
func (l *standingLanes) asleep() bool {
	return time.Duration(l.lastGap.Load()) > max(l.spin, 0)
}

// leave notes the end of a staged transfer.
func (l *standingLanes) leave() {
	l.lastEnd.Store(int64(time.Since(epoch)))
	l.active.Add(-1)
}

// spinFor is how long a lane that finished its part looks for the next transfer before it sleeps:
// LaneSpin when the transfer came within LaneSpin of the one before, else not at all.
func (l *standingLanes) spinFor() time.Duration {
	if l.spin <= 0 || time.Duration(l.lastGap.Load()) > l.spin {
		return 0
	}
	return l.spin
}

// job is a transfer offered to the lanes: join runs a lane of it, or nothing once it is closed.
type job interface{ join() }

// newStandingLanes starts n lanes that spin for up to spin (none when it is not positive) before
// they sleep.
func newStandingLanes(n int, spin time.Duration) *standingLanes {
	l := &standingLanes{offerBoard: offerBoard{make([]atomic.Pointer[boardOffer], max(n, 1))}, wake: make(chan struct{}, max(n, 1)), spin: spin}
	l.lastEnd.Store(math.MinInt64 / 2) // no transfer yet: an endless gap
	l.lastGap.Store(math.MaxInt64)
	for range n {
		l.wg.Go(l.work)
	}
	return l
}

// work runs lanes of the transfers it is offered until stop.
func (l *standingLanes) work() {
	debug.SetPanicOnFault(true) // see copyIn
	for j, ok := l.next(); ok; j, ok = l.next() {
		j.join()
	}
}

// next returns the next transfer offered, spinning for spinFor before it sleeps; ok is false once
// the lanes are stopped.
func (l *standingLanes) next() (j job, ok bool) {
	poll := func() bool {
		j = l.take()
		return j != nil || l.quitting.Load()
	}
	for {
		if spinUntil(poll, l.spinFor()) {
			return j, j != nil
		}
		if testHookBeforeSleep != nil {
			testHookBeforeSleep()
		}
		// Counted as asleep before the last look at the board: an offer published after that look
		// sees the count and wakes a lane.
		l.sleeping.Add(1)
		found := poll()
		if !found {
			<-l.wake // the offer may be taken already: look again
		}
		l.sleeping.Add(-1)
		if found {
			return j, j != nil
		}
	}
}

// testHookBeforeSleep, set by a test before the lanes start, runs in a lane that found no offer
// before it counts itself asleep, to widen the window in which an offer can be published unseen.
var testHookBeforeSleep func()

// offer asks for up to n lanes for j without waiting: it puts the offer on the board and wakes as
// many sleeping lanes as it needs. With no free slot (every lane has work) j runs on its caller
// alone. The board replaced a channel of offers, whose lock the spinning lanes contended for: an
// uploaded frame moved faster by more than a second mechanism's margin (BenchmarkFrameStream).
func (l *standingLanes) offer(j job, n int) {
	if n <= 0 || !l.put(j, n) {
		return
	}
	for range min(n, int(l.sleeping.Load())) {
		select {
		case l.wake <- struct{}{}:
		default:
			return
		}
	}
}

// offerBoard is a slot per standing lane (more offers could not all be served), each holding a job
// and the count of lanes it still wants.
type offerBoard struct {
	slots []atomic.Pointer[boardOffer]
}

type boardOffer struct {
	j    job
	left atomic.Int32
}

// put publishes an offer of j to n lanes in a free slot, and reports false when none is free.
func (b *offerBoard) put(j job, n int) bool {
	o := &boardOffer{j: j}
	o.left.Store(int32(n))
	for i := range b.slots {
		if b.slots[i].Load() == nil && b.slots[i].CompareAndSwap(nil, o) {
			return true
		}
	}
	return false
}

// take claims one lane of an offer and returns its job, or nil when the board is empty. The lane
// that takes an offer's last lane, or finds it taken, frees its slot.
func (b *offerBoard) take() job {
	for i := range b.slots {
		if o := b.slots[i].Load(); o != nil {
			left := o.left.Add(-1)
			if left <= 0 {
				b.slots[i].CompareAndSwap(o, nil)
			}
			if left >= 0 {
				return o.j
			}
		}
	}
	return nil
}

// withdraw frees the slot of j's offer, if it is still on the board: once j is closed to lanes, so
// that only live offers hold slots.
func (b *offerBoard) withdraw(j job) {
	for i := range b.slots {
		if o := b.slots[i].Load(); o != nil && o.j == j {
			b.slots[i].CompareAndSwap(o, nil)
		}
	}
}

// stop ends the lanes and waits for them; transfers must be over.
func (l *standingLanes) stop() {
	l.quitting.Store(true)
	close(l.wake)
	l.wg.Wait()
}

// runState is what a staged transfer's lanes share: the first error, the stop, the lanes joined.
type runState struct {
	stop atomic.Bool

	mu     sync.Mutex // guards err, closed and Add on joined (and a progress's done and sizes); a leaf of the lock order (see Copier)
	err    error
	closed bool           // no lane may join any more
	joined sync.WaitGroup // standing lanes that joined
	in     atomic.Int32   // joined lanes still at work, for endJoins to spin on
}

// endSpin is how long endJoins spins on the joined lanes before it sleeps, when the lanes spin
// (spinFor): a cooperative transfer's lanes end within a stripe of each other, and a caller that
// sleeps wakes late beside spinning lanes (BenchmarkFrameStream, downloads).
var endSpin = 50 * time.Microsecond

// fail records err (the first one wins) and stops the transfer.
func (s *runState) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.stop.Store(true)
}

// joinLane runs lane on a standing lane, unless the transfer is closed to lanes (a stale offer).
func (s *runState) joinLane(lane func()) {
	if s.enter(nil) {
		defer s.exit()
		lane()
	}
}

// enter counts a standing lane in, unless the transfer is closed to lanes, and reports whether it
// did; owners, when not nil, counts it as an owner too, under the closing's lock (the handoff).
func (s *runState) enter(owners *atomic.Int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.joined.Add(1)
	s.in.Add(1)
	if owners != nil {
		owners.Add(1)
	}
	return true
}

// exit counts a lane that entered out again.
func (s *runState) exit() {
	s.in.Add(-1)
	s.joined.Done()
}

// endJoins closes the transfer to lanes and waits for those that joined, spinning up to spin first.
func (s *runState) endJoins(spin time.Duration) {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if spin > 0 {
		spinUntil(func() bool { return s.in.Load() == 0 }, spin)
	}
	s.joined.Wait()
}

// endSpinFor is how long a transfer's caller spins on its lanes' end: endSpin while lanes spin.
func (l *standingLanes) endSpinFor() time.Duration {
	if l.spinFor() == 0 {
		return 0
	}
	return endSpin
}

// spinYieldEvery is how long spinUntil busy-waits between two yields of the processor. A yield goes
// through the scheduler's global lock, and lanes that yielded after every look delayed the
// goroutines doing the work; the value lies between yielding often, which suits uploaded frames,
// and rarely, which suits downloads and spends less CPU time (BenchmarkFrameStream).
var spinYieldEvery = 20 * time.Microsecond

// spinLooks is how many looks spinUntil takes between two readings of the clock.
const spinLooks = 16

// spinUntil calls ready, with a CPU pause in between, until it reports true or limit has passed
// (negative: no limit; zero: one call), and reports ready's last answer. It is the package's one
// busy wait, for waits shorter than a thread wake-up.
func spinUntil(ready func() bool, limit time.Duration) bool {
	if ready() {
		return true
	}
	if limit == 0 {
		return false
	}
	start := time.Now()
	var yielded time.Duration
	for {
		for range spinLooks {
			cpuRelax()
			if ready() {
				return true
			}
		}
		spun := time.Since(start)
		if limit > 0 && spun >= limit {
			return false
		}
		if spun-yielded >= spinYieldEvery {
			runtime.Gosched()
			yielded = spun
		}
	}
}
