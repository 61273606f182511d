package pinpool

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// core is the state the size classes share with their pool: the
// accounting lock and what it guards, the budget, the backend, the
// switches read on the hot path, and the way to wake the janitor. A class
// sees this and nothing else of the Pool.
//
// Lock order, from outer to inner (a lock is never taken while one to its
// right is held):
//
//	class.growMu → Pool.pollMu → core.mu → procCache's stack and central
//	mutexes (leaves; never two at once)
//	budget.mu, pendingList.mu and a processor's ownerLock are leaves too.
//
// Get and Release take none of them while a processor's private cache
// serves them (procCache.get, put).
type core struct {
	// Read on every Get and Release; written once, or (waiters) only by
	// Gets that wait for room.
	debug      bool
	closedFlag atomic.Bool     // Close began
	waiters    atomic.Int32    // Gets waiting for room (budget.broadcast wakes them)
	_          [cacheLine]byte // keeps what slow paths write off those lines

	backend     Backend
	backendName string
	memTotal    int64         // MemTotal, 0 when unknown
	page        int64         // the system page size at New: unit of every size and alignment
	lockLimit   int64         // what the backend may lock (RLIMIT_MEMLOCK) at New, when lockLimited
	lockLimited bool          // RLIMIT_MEMLOCK bounds the backend (lockLimit may then be 0)
	userBudget  int64         // Options.Budget (budget.limit is the smaller of it and lockLimit)
	guard       guard         // the memory guard: system and cgroup headroom
	closedCh    chan struct{} // closed by Close: wakes every waiting Get
	growCtx     context.Context
	stopGrowth  context.CancelFunc // cancels growCtx: Close stops growths in flight within a piece
	growLimit   int64              // the backend's GrowLimit: the most bytes one allocation should take; 0: none
	kick        func()             // wakes the janitor; never blocks

	budget  budget
	pending pendingList

	// mu guards the chunk sets of all classes and the counters below, so
	// that Stats reads them as one snapshot.
	mu      sync.Mutex
	closed  bool
	freeing int        // chunks unlinked and not yet given back to the backend
	freed   *sync.Cond // on mu: broadcast when freeing drops to 0 (Close waits for it)
	held    int64      // bytes of live chunks
	peak    int64      // highest held
	acct    accounts

	// Counters of events outside the accounting lock (each counted once).
	budgetWaits, budgetRefusals, lowMemory atomic.Uint64
	fenceReleases, fenceErrors             atomic.Uint64
	failures, freeFailures, backendPanics  atomic.Uint64

	growTimes, waitTimes durationHistogram // one observation per growth, per waiting Get
}

// accounts are the counters that change with the chunk sets (under
// core.mu).
type accounts struct {
	grows, trims             uint64
	trimsBy                  TrimCounts
	bytesGrown, bytesTrimmed int64
	growNanos, maxGrowNanos  int64
}

// awaitFrees waits for the chunks on their way back to the backend, if
// any, and reports whether there were some: their bytes are in the budget
// until their Free returns.
func (co *core) awaitFrees() bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	had := co.freeing > 0
	co.waitFrees()
	return had
}

// waitFrees waits until no chunk is on its way back to the backend. The
// caller holds mu.
func (co *core) waitFrees() {
	for co.freeing > 0 {
		co.freed.Wait()
	}
}

// boundByLockLimit reports whether the budget in force is RLIMIT_MEMLOCK's
// allowance rather than Options.Budget, so that refusals name the limit.
func (co *core) boundByLockLimit() bool {
	return co.lockLimited && co.budget.limit == max(co.lockLimit, 1) && (co.userBudget == 0 || co.userBudget > co.lockLimit)
}

// isClosed reports whether Close began.
func (co *core) isClosed() bool { return co.closedFlag.Load() }

// addChunk makes a grown chunk live, unless the pool closed meanwhile
// (then it returns false and the caller frees it). missServed says whether
// the chunk's first slot serves a Get that missed. The caller holds no lock.
func (co *core) addChunk(c *class, ch *chunk, took time.Duration, missServed bool) bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.closed {
		return false
	}
	c.setChunks(append(c.chunkList(), ch))
	c.grows++
	if missServed {
		c.missServed++
	}
	co.held += ch.bytes
	co.peak = max(co.peak, co.held)
	a := &co.acct
	a.grows++
	a.bytesGrown += ch.bytes
	a.growNanos += int64(took)
	a.maxGrowNanos = max(a.maxGrowNanos, int64(took))
	co.growTimes.observe(took)
	return true
}
