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
