package pinpool

import (
	"errors"
	"slices"
)

// Freeing memory: a chunk goes back to the backend when every one of its
// buffers is idle (or retired after a failed fence). Candidates are
// claimed and unlinked under core.mu, and freed after it is released, so
// that Get and Release never wait for a backend's Free (which may
// synchronize the device).

// trimClass frees chunks of the class whose buffers are all idle or
// retired, while more than keepIdle idle buffers would remain and until at
// least want bytes are freed (want < 0: no byte target); pick, when not
// nil, chooses among the candidates. It returns the bytes freed and the
// backend's errors.
func (c *class) trimClass(want int64, keepIdle int, pick func(*chunk) bool) (int64, error) {
	co := c.core
	co.mu.Lock()
	idle := c.idleCount()
	var victims []*chunk
	var bytes int64
	for _, ch := range c.chunkList() {
		if want >= 0 && bytes >= want {
			break
		}
		if pick != nil && !pick(ch) {
			continue
		}
		n := idleIn(ch)
		if idle-n < keepIdle || !ch.claimForFree() {
			continue
		}
		victims = append(victims, ch)
		bytes += ch.bytes
		idle -= n
	}
	c.unlink(victims)
	co.mu.Unlock()
	if len(victims) > 0 {
		c.ramp.Store(int64(c.batch))
	}
	return bytes, c.freeVictims(victims)
}

// freeChunk frees one chunk if every buffer of it is idle or retired.
func (c *class) freeChunk(ch *chunk) {
	co := c.core
	co.mu.Lock()
	if ch.freed || !ch.claimForFree() {
		co.mu.Unlock()
		return
	}
	c.unlink([]*chunk{ch})
	co.mu.Unlock()
	c.freeVictims([]*chunk{ch})
}

// unlink takes claimed chunks out of the class's set and the accounts.
// The caller holds core.mu.
func (c *class) unlink(victims []*chunk) {
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
	var errs []error
	for _, ch := range victims {
		if err := co.backendFree(ch.alloc); err != nil {
			errs = append(errs, err)
		}
		co.budget.release(ch.bytes)
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
func (p *Pool) trimOthers(want int64, except *class) int64 {
	var freed int64
	for _, c := range p.classList() {
		if freed >= want {
			break
		}
		if c == except {
			continue
		}
		f, _ := c.trimClass(want-freed, int(c.reserved.Load()), nil)
		freed += f
	}
	return freed
}
