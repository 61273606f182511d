package pinpool

import (
	"cmp"
	"slices"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a pool's state and counters. Byte figures count
// buffer capacities (size classes), not the lengths asked of Get.
//
// Every snapshot is consistent: BytesHeld == BytesInUse + BytesIdle +
// BytesPending + BytesRetired == BytesGrown - BytesTrimmed, BytesHeld <=
// Budget when there is one, PeakHeld is between BytesHeld and BytesGrown,
// and Gets == Hits + Misses, pool-wide and per class. Counters never go
// back: each counts events, once per event. The states of the buffers are
// read one after another, not at one instant: while other goroutines get
// and release buffers, a buffer released and another got during one call
// may both count as in use, so a peak of BytesInUse sampled by Stats can
// exceed the true one by the buffers that changed hands meanwhile.
type Stats struct {
	Backend string // the backend's Name

	BytesHeld    int64 // allocated from the backend: in use + idle + pending + retired
	BytesInUse   int64 // handed out and not released
	BytesIdle    int64 // ready to hand out
	BytesPending int64 // released with a fence that has not completed
	BytesRetired int64 // retired after a fence error, freed with the rest of their allocation
	PeakHeld     int64 // highest BytesHeld so far
	Budget       int64 // Options.Budget; 0: none
	LockLimit    int64 // bytes the backend could lock at New under RLIMIT_MEMLOCK, kept like a budget (when LockLimited)
	LockLimited  bool  // RLIMIT_MEMLOCK bounds the backend: LockLimit is what it allows, 0 when it allows no locking
	// BytesHugePages is how much of BytesHeld was backed by huge pages when
	// allocated, as the backend's allocations report it (the hugetlb pool,
	// or the transparent huge pages the kernel gave); 0 when the backend
	// does not say.
	BytesHugePages int64
	// PinSplits counts pin calls that the system refused for their size and
	// that the backend retried in smaller parts (the cudahost Register
	// backend: Backend.SplitRetries).
	PinSplits uint64

	Gets   uint64 // Get and TryGet calls for a valid size on an open pool
	Hits   uint64 // ... served at once from idle memory
	Misses uint64 // ... that found no idle buffer and had to grow or wait (served or not)

	Grows       uint64        // backend allocations
	BytesGrown  int64         // bytes allocated by them
	GrowTime    time.Duration // total time spent in backend allocations
	MaxGrowTime time.Duration // the slowest one

	GrowTimes       Histogram // the time of each backend allocation (see DurationBounds)
	BudgetWaitTimes Histogram // how long each Get that waited for room waited, served or not

	Trims        uint64     // backend frees by policy, Trim or Close
	TrimsBy      TrimCounts // ... by reason (TrimReason); they add up to Trims
	BytesTrimmed int64

	ReleasedAfterFence uint64 // buffers returned after their fence completed
	FenceErrors        uint64 // buffers retired because their fence failed or panicked
	Failures           uint64 // failed backend allocations (errors, panics, bad memory)
	FreeFailures       uint64 // backend frees that failed or panicked (the memory is lost to the pool either way)
	BackendPanics      uint64 // panics of the backend, contained (also counted in Failures or FreeFailures)
	BudgetWaits        uint64 // Get calls that had to wait for room
	BudgetRefusals     uint64 // growths refused by the budget
	LowMemoryRefusals  uint64 // growths refused by the system guard

	Classes []ClassStats // per size class, by size
}

// ClassStats describes one size class.
type ClassStats struct {
	Size        int64 // capacity of each buffer
	BuffersHeld int64 // live buffers (in use + idle + pending)
	InUse       int64
	Idle        int64
	Pending     int64
	Retired     int64 // buffers retired after a fence error, not yet freed
	BytesHeld   int64 // bytes of the class's allocations, retired buffers included
	Gets, Hits  uint64
	Misses      uint64
	Grows       uint64
	PerAlloc    int           // buffers per backend allocation when a Get grows the class (Reserve may allocate more at once)
	AllocBytes  int64         // bytes of such an allocation
	IdleDecay   time.Duration // how long idle buffers above MaxIdle stay after their last use (Options.IdleDecay, doubled each time the class regrew soon after a decay); <= 0: never by decay
}

// Stats returns a snapshot. It holds the pool's accounting lock while it
// reads every buffer's state word: growth and trimming wait for it, Get
// and Release do not (they count nothing: hits are derived from the
// buffers' generations, so reading stats costs the hot path nothing).
func (p *Pool) Stats() Stats {
	co := p.core
	co.mu.Lock()
	defer co.mu.Unlock()
	a := co.acct
	st := Stats{
		Backend:      co.backendName,
		BytesHeld:    co.held,
		PeakHeld:     co.peak,
		Budget:       co.userBudget,
		LockLimit:    co.lockLimit,
		LockLimited:  co.lockLimited,
		Grows:        a.grows,
		BytesGrown:   a.bytesGrown,
		GrowTime:     time.Duration(a.growNanos),
		MaxGrowTime:  time.Duration(a.maxGrowNanos),
		Trims:        a.trims,
		TrimsBy:      a.trimsBy,
		BytesTrimmed: a.bytesTrimmed,
	}
	for _, c := range p.classList() {
		cs := ClassStats{Size: c.size, PerAlloc: c.batch, AllocBytes: int64(c.batch) * c.size, Grows: c.grows, IdleDecay: time.Duration(c.decay.Load())}
		handed := c.pastServed // hand-outs, over all slots ever
		for _, ch := range c.chunkList() {
			cs.BytesHeld += ch.bytes
			st.BytesHugePages += min(ch.huge, ch.bytes)
			for i := range ch.slots {
				w := ch.slots[i].state.Load()
				handed += served(w)
				switch stateOf(w) {
				case stInUse:
					cs.InUse++
				case stPending:
					cs.Pending++
				case stRetired:
					cs.Retired++
				default: // idle, busy (being poisoned after a release)
					cs.Idle++
				}
			}
		}
		// A Get served after a miss moved its slot and missServed
		// together under core.mu: the rest of the hand-outs are hits.
		cs.Misses = c.misses.Load()
		cs.Hits = handed - c.missServed
		cs.Gets = cs.Hits + cs.Misses
		cs.BuffersHeld = cs.InUse + cs.Idle + cs.Pending
		st.BytesInUse += cs.InUse * c.size
		st.BytesIdle += cs.Idle * c.size
		st.BytesPending += cs.Pending * c.size
		st.BytesRetired += cs.Retired * c.size
		st.Gets += cs.Gets
		st.Hits += cs.Hits
		st.Misses += cs.Misses
		st.Classes = append(st.Classes, cs)
	}
	st.ReleasedAfterFence = co.fenceReleases.Load()
	st.FenceErrors = co.fenceErrors.Load()
	st.Failures = co.failures.Load()
	st.FreeFailures = co.freeFailures.Load()
	st.BackendPanics = co.backendPanics.Load()
	st.BudgetWaits = co.budgetWaits.Load()
	st.BudgetRefusals = co.budgetRefusals.Load()
	st.LowMemoryRefusals = co.lowMemory.Load()
	st.PinSplits = splitRetriesOf(co.backend)
	st.GrowTimes = co.growTimes.snapshot()
	st.BudgetWaitTimes = co.waitTimes.snapshot()
	slices.SortFunc(st.Classes, func(a, b ClassStats) int { return cmp.Compare(a.Size, b.Size) })
	return st
}

// DurationBounds are the upper bounds of the duration histograms in Stats
// (growth times, budget waits): from 10 µs to 10 s by factors of ten, and
// above the last one the overflow bucket. It is for reading: the pools
// count with their own copy, and every Stats snapshot carries its own copy
// in Histogram.Bounds, so writing into either changes nothing else.
var DurationBounds = []time.Duration{
	10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond,
	10 * time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second,
}

// durationBounds are the bounds that the pools count with: a copy of
// DurationBounds made before anyone can write into it.
var durationBounds = [7]time.Duration(DurationBounds)

// Histogram counts events by duration. Counts[i] is the events of at most
// Bounds[i] and more than Bounds[i-1]; the last count, one past Bounds,
// is the events above the last bound. Sum is their total duration.
type Histogram struct {
	Bounds []time.Duration
	Counts []uint64
	Sum    time.Duration
}

// Count is the number of events.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// durationHistogram records durations with atomics: a slow-path event
// (a growth, a wait) costs two atomic additions.
type durationHistogram struct {
	counts [len(durationBounds) + 1]atomic.Uint64
	sum    atomic.Int64
}

func (h *durationHistogram) observe(d time.Duration) {
	i := 0
	for i < len(durationBounds) && d > durationBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// snapshot copies the histogram out. Every count only grows, so two
// snapshots in turn never go back.
func (h *durationHistogram) snapshot() Histogram {
	out := Histogram{Bounds: append([]time.Duration(nil), durationBounds[:]...), Counts: make([]uint64, len(h.counts))}
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
	}
	out.Sum = time.Duration(h.sum.Load())
	return out
}
