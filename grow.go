package pinpool

import (
	"fmt"

	"github.com/pinpool/pinpool/hostmem"
)

// grow allocates new memory for the class. For a Get (forGet) it returns
// the first new buffer, in use, and counts it as served after a miss; the
// rest of the batch, and everything Reserve grows, goes to the central
// list. A large class grows by min(GrowCount, GrowBytes/size) buffers,
// each its own allocation; a slab class by one slab. The caller holds no
// lock.
func (p *Pool) grow(c *class, forGet bool) (*slot, error) {
	c.growMu.Lock()
	defer c.growMu.Unlock()
	co := p.core
	if forGet {
		// Another goroutine's growth may have made buffers idle meanwhile.
		if s := p.takeAfterMiss(c); s != nil {
			return s, nil
		}
	}
	count := 1
	if c.perChunk == 1 {
		count = int(max(1, min(int64(p.opt.GrowCount), p.opt.GrowBytes/c.size)))
	}
	var first *slot
	for i := range count {
		if err := p.reserve(c, c.chunkBytes); err != nil {
			if i > 0 {
				break
			}
			return nil, err
		}
		a, mem, took, err := co.backendAlloc(c.chunkBytes)
		if err != nil {
			co.budget.release(c.chunkBytes)
			if i > 0 {
				break
			}
			return nil, err
		}
		serve := forGet && first == nil
		ch := c.newChunk(a, mem, serve)
		if !co.addChunk(c, ch, took, serve) {
			co.backendFree(a)
			co.budget.release(c.chunkBytes)
			if first != nil {
				break // served before Close: freed when released
			}
			return nil, ErrClosed
		}
		rest := ch.slots
		if serve {
			first, rest = &ch.slots[0], rest[1:]
		}
		es := make([]entry, len(rest))
		for j := range rest {
			es[j] = entry{&rest[j], 0}
		}
		c.cache.putShared(es...)
	}
	return first, nil
}

// reserve makes room for n more bytes: within the budget (after polling
// fences and trimming idle memory of other classes beyond what Reserve
// keeps) and above the system guard's floor.
func (p *Pool) reserve(c *class, n int64) error {
	co := p.core
	if co.minAvail > 0 {
		if mi, err := hostmem.ReadMemInfo(); err == nil && int64(mi.Available)-n < co.minAvail {
			p.trimOthers(n, c)
			if mi, err := hostmem.ReadMemInfo(); err == nil && int64(mi.Available)-n < co.minAvail {
				co.lowMemory.Add(1)
				return fmt.Errorf("%w: need %d bytes, MemAvailable %d, floor %d", ErrLowMemory, n, mi.Available, co.minAvail)
			}
		}
	}
	if co.budget.tryReserve(n) {
		return nil
	}
	p.pollPending(false)
	p.trimOthers(n, c)
	if co.budget.tryReserve(n) {
		return nil
	}
	co.budgetRefusals.Add(1)
	return fmt.Errorf("%w: need %d bytes for %d-byte buffers, holding %d of Budget %d", ErrBudget, n, c.size, co.budget.held.Load(), co.budget.limit)
}

// impossible explains why a request of class c can never be served, or
// returns nil: its allocation is larger than the whole budget, or than the
// memory the system guard would ever let the pool lock.
func (p *Pool) impossible(c *class) error {
	co := p.core
	if co.budget.limit > 0 && c.chunkBytes > co.budget.limit {
		co.budgetRefusals.Add(1)
		return fmt.Errorf("%w: a %d-byte buffer needs a %d-byte allocation, more than the whole Budget of %d bytes", ErrBudget, c.size, c.chunkBytes, co.budget.limit)
	}
	if co.minAvail > 0 && co.memTotal > 0 && c.chunkBytes > co.memTotal-co.minAvail {
		co.lowMemory.Add(1)
		return fmt.Errorf("%w: a %d-byte buffer needs a %d-byte allocation; the system has %d bytes (MemTotal) and keeps %d available (Options.MinAvailable)", ErrLowMemory, c.size, c.chunkBytes, co.memTotal, co.minAvail)
	}
	return nil
}

// takeAfterMiss claims an idle buffer for a Get that already counted a
// miss, and counts it served after a miss, under core.mu so that Stats
// never sees the one without the other.
func (p *Pool) takeAfterMiss(c *class) *slot {
	co := p.core
	co.mu.Lock()
	defer co.mu.Unlock()
	s := c.findIdle()
	if s != nil {
		c.missServed++
	}
	return s
}
