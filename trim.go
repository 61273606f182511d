package pinpool

import "errors"

// trim frees chunks of the class whose buffers are all idle (or retired),
// while more than keepIdle idle buffers would remain and until at least
// want bytes are freed (want < 0: no byte target); only != nil limits it to
// that chunk. It collects under the class's locks and frees after releasing
// them, so Get and Release never wait for a backend Free. It returns the
// bytes freed and the Free errors.
func (c *class) trim(want int64, keepIdle int, only *chunk) (int64, error) {
	c.mu.Lock()
	for i := range c.shards {
		c.shards[i].mu.Lock()
	}
	// Private slots join the central list for the count (and stay there).
	for i := range c.shards {
		if s := c.shards[i].private.Swap(nil); s != nil {
			c.free = append(c.free, s)
		}
	}
	idle := map[*chunk]int{}
	total := len(c.free)
	for _, s := range c.free {
		idle[s.chunk]++
	}
	for i := range c.shards {
		for _, s := range c.shards[i].stack {
			idle[s.chunk]++
		}
		total += len(c.shards[i].stack)
	}
	var victims []*chunk
	var bytes int64
	for ch, n := range idle {
		if want >= 0 && bytes >= want {
			break
		}
		if (only != nil && ch != only) || n+ch.retired != len(ch.slots) || total-n < keepIdle {
			continue
		}
		victims = append(victims, ch)
		bytes += ch.bytes
		total -= n
	}
	// chunks with every slot retired have no idle slot to be found by.
	for ch := range c.chunks {
		if ch.retired == len(ch.slots) && !ch.freed && (only == nil || ch == only) {
			victims = append(victims, ch)
			bytes += ch.bytes
		}
	}
	if len(victims) > 0 {
		dead := map[*chunk]bool{}
		for _, ch := range victims {
			dead[ch] = true
			ch.freed = true
			delete(c.chunks, ch)
			c.held -= ch.bytes
			for i := range ch.slots {
				c.pastGens += int64(ch.slots[i].gen.Load())
			}
			c.slots -= int64(len(ch.slots) - ch.retired)
		}
		c.free = dropDead(c.free, dead)
		for i := range c.shards {
			sh := &c.shards[i]
			sh.stack = dropDead(sh.stack, dead)
			sh.low = min(sh.low, len(sh.stack))
		}
		c.low = min(c.low, len(c.free))
	}
	for i := range c.shards {
		c.shards[i].mu.Unlock()
	}
	c.mu.Unlock()

	var errs []error
	for _, ch := range victims {
		if err := ch.alloc.Free(); err != nil {
			errs = append(errs, err)
		}
		c.pool.budget.release(ch.bytes)
	}
	if len(victims) > 0 {
		c.pool.stats.trims.Add(uint64(len(victims)))
		c.pool.stats.bytesTrimmed.Add(bytes)
		c.pool.budget.broadcast()
	}
	return bytes, errors.Join(errs...)
}

// dropDead removes slots of dead chunks in place.
func dropDead(ss []*slot, dead map[*chunk]bool) []*slot {
	out := ss[:0]
	for _, s := range ss {
		if !dead[s.chunk] {
			out = append(out, s)
		}
	}
	clear(ss[len(out):])
	return out
}

// retire takes a slot out of use for good after its fence failed: the
// device may still touch it. Its chunk is freed once every other slot of it
// is idle or retired.
func (c *class) retire(s *slot) {
	c.mu.Lock()
	s.chunk.retired++
	c.slots--
	c.mu.Unlock()
	c.pool.stats.fenceErrors.Add(1)
	c.trim(-1, 0, s.chunk)
}
