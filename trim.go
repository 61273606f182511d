package pinpool

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// freeWorkers is how many goroutines give one trim's allocations back at
// once (BenchmarkArena measures Close of a large arena).
const freeWorkers = 8

// Freeing memory: a chunk goes back to the backend when every one of its
// buffers is idle (or retired after a failed fence). Candidates are
// claimed and unlinked under core.mu, and freed after it is released, so
// that Get and Release never wait for a backend's Free (which may
// synchronize the device).

// trimPlan says what one trim of a class frees.
type trimPlan struct {
	want   int64             // bytes to free at least; < 0: no byte target
	keep   int               // idle buffers that stay
	below  bool              // may free a chunk that takes the idle count below keep, while it is above keep before (so that at most keep stay idle)
	floor  int               // idle buffers that stay even when below is set: what Reserve asked to keep
	pick   func(*chunk) bool // chooses among the candidates; nil: any
	reason TrimReason
}

// trimClass frees chunks of the class whose buffers are all idle or
// retired, as the plan says. It returns the bytes freed and the backend's
// errors.
func (c *class) trimClass(pl trimPlan) (int64, error) {
	co := c.core
	co.mu.Lock()
	idle := c.idleCount()
	var victims []*chunk
	var bytes int64
	for _, ch := range c.chunkList() {
		if pl.want >= 0 && bytes >= pl.want {
			break
		}
		if pl.below && idle <= pl.keep {
			break
		}
		if pl.pick != nil && !pl.pick(ch) {
			continue
		}
		n := idleIn(ch)
		if !pl.below && idle-n < pl.keep || idle-n < pl.floor || !ch.claimForFree() {
			continue
		}
		victims = append(victims, ch)
		bytes += ch.bytes
		idle -= n
	}
	c.unlink(victims, pl.reason)
	if pl.reason == TrimDecay && len(victims) > 0 {
		c.decayed.Store(time.Now().UnixNano()) // before Stats can show the trim: a growth that follows sees it
	}
	co.mu.Unlock()
	if len(victims) > 0 {
		c.ramp.Store(int64(c.batch))
	}
	return bytes, c.freeVictims(victims)
}

// freeChunk frees one chunk if every buffer of it is idle or retired.
func (c *class) freeChunk(ch *chunk, reason TrimReason) {
	co := c.core
	co.mu.Lock()
	if ch.freed || !ch.claimForFree() {
		co.mu.Unlock()
		return
	}
	c.unlink([]*chunk{ch}, reason)
	co.mu.Unlock()
	c.freeVictims([]*chunk{ch})
}

// unlink takes claimed chunks out of the class's set and the accounts.
// The caller holds core.mu.
func (c *class) unlink(victims []*chunk, reason TrimReason) {
	if len(victims) == 0 {
		return
	}
	co := c.core
	co.freeing += len(victims)
	for _, ch := range victims {
		ch.freed = true
		c.pastServed += ch.servedSum()
		co.held -= ch.bytes
		co.acct.trims++
		co.acct.trimsBy[reason]++
		co.acct.bytesTrimmed += ch.bytes
	}
	c.setChunks(slices.DeleteFunc(slices.Clone(c.chunkList()), func(ch *chunk) bool { return ch.freed }))
}

// freeVictims gives unlinked chunks back to the backend and their bytes
// back to the budget, whatever the backend does (a failed or panicking
// Free is counted and returned; the pool does not hold that memory any
// more either way).
func (c *class) freeVictims(victims []*chunk) error {
	if len(victims) == 0 {
		return nil
	}
	c.cache.clean()
	co := c.core
	errs := make([]error, len(victims))
	free := func(i int) {
		errs[i] = co.backendFree(victims[i].alloc)
		co.budget.release(victims[i].bytes)
	}
	if len(victims) == 1 {
		free(0)
	} else {
		// Frees of a large arena run side by side: each waits on the
		// driver or the kernel for a while (unregistering, unmapping),
		// and much of that wait is not serialised.
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(len(victims), freeWorkers) {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < len(victims); i = int(next.Add(1) - 1) {
					free(i)
				}
			})
		}
		wg.Wait()
	}
	co.mu.Lock()
	if co.freeing -= len(victims); co.freeing == 0 {
		co.freed.Broadcast()
	}
	co.mu.Unlock()
	return errors.Join(errs...)
}

// idleIn counts the idle buffers of one chunk.
func idleIn(ch *chunk) int {
	n := 0
	for i := range ch.slots {
		if idleState(stateOf(ch.slots[i].state.Load())) {
			n++
		}
	}
	return n
}

// trimOthers frees idle memory of every class but except, until want
// bytes are freed, sparing what Reserve asked each class to keep. (The
// class that grows is spared: its idle buffers would have been used
// instead of growing.)
func (p *Pool) trimOthers(want int64, except *class, reason TrimReason) int64 {
	var freed int64
	for _, c := range p.classList() {
		if freed >= want {
			break
		}
		if c == except {
			continue
		}
		f, _ := c.trimClass(trimPlan{want: want - freed, keep: int(c.reserved.Load()), reason: reason})
		freed += f
	}
	return freed
}

// TrimReason says why the pool gave an allocation back to its backend.
// Stats.TrimsBy counts the frees by reason.
type TrimReason int

// The reasons the pool frees memory.
const (
	// TrimCap: idle memory of one size freed to make room for another
	// under a cap: the Budget, RLIMIT_MEMLOCK or the cgroup's limit.
	TrimCap TrimReason = iota
	// TrimDecay: idle memory above MaxIdle per class not needed for the
	// class's decay time (Options.IdleDecay).
	TrimDecay
	// TrimIdleTimeout: idle memory not needed for Options.IdleTimeout.
	TrimIdleTimeout
	// TrimPressure: idle memory freed because the system's or the
	// cgroup's headroom fell below Options.MinAvailable.
	TrimPressure
	// TrimExplicit: Pool.Trim.
	TrimExplicit
	// TrimClose: Pool.Close, and buffers that came back after it.
	TrimClose
	// TrimFenceError: an allocation freed once the buffers of it whose
	// fence failed were the only ones left.
	TrimFenceError
	// TrimReserveFailed: memory a Reserve grew and no Get took, freed
	// because the Reserve failed or was cancelled.
	TrimReserveFailed

	numTrimReasons
)

var trimReasonNames = [numTrimReasons]string{"cap", "decay", "idle_timeout", "pressure", "explicit", "close", "fence_error", "reserve_failed"}

// String returns the reason's name as metrics label it: "cap", "decay",
// "idle_timeout", "pressure", "explicit", "close", "fence_error" or
// "reserve_failed".
func (r TrimReason) String() string {
	if r < 0 || r >= numTrimReasons {
		return "unknown"
	}
	return trimReasonNames[r]
}

// TrimReasons lists every TrimReason, in order.
func TrimReasons() []TrimReason {
	rs := make([]TrimReason, numTrimReasons)
	for i := range rs {
		rs[i] = TrimReason(i)
	}
	return rs
}

// TrimCounts counts backend frees by reason; the counts add up to
// Stats.Trims.
type TrimCounts [8]uint64

// TrimCounts has one count per reason: the length is a literal so that the
// documentation shows no unexported name, and this fails to compile when a
// reason is added without it.
var _ = [1]struct{}{}[len(TrimCounts{})-int(numTrimReasons)]

// Of returns the count of one reason (0 for an unknown one).
func (t TrimCounts) Of(r TrimReason) uint64 {
	if r < 0 || r >= numTrimReasons {
		return 0
	}
	return t[r]
}

// Sum returns the count over every reason.
func (t TrimCounts) Sum() uint64 {
	var n uint64
	for _, v := range t {
		n += v
	}
	return n
}
