package pinpool

import "sync"

// pendingList holds buffers released with a fence that has not yet
// reported done.
type pendingList struct {
	mu    sync.Mutex
	items []pendingItem
}

type pendingItem struct {
	s *slot
	f Fence
}

func (l *pendingList) add(s *slot, f Fence) {
	s.chunk.class.pending.Add(1)
	l.mu.Lock()
	l.items = append(l.items, pendingItem{s, f})
	l.mu.Unlock()
}

func (l *pendingList) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items)
}

// poll asks every pending fence once, without blocking on any: done buffers
// go back to their class, failed ones are retired. It returns how many are
// still pending. Only one poll runs at a time; a concurrent caller returns
// at once (block == false) or waits its turn.
func (p *Pool) pollPending(block bool) int {
	if block {
		p.pollMu.Lock()
	} else if !p.pollMu.TryLock() {
		return -1
	}
	defer p.pollMu.Unlock()
	l := &p.pending
	l.mu.Lock()
	items := l.items
	l.items = nil
	l.mu.Unlock()
	var keep []pendingItem
	for _, it := range items {
		done, err := it.f.Done()
		c := it.s.chunk.class
		switch {
		case err != nil:
			c.pending.Add(-1)
			c.retire(it.s)
		case done:
			c.pending.Add(-1)
			p.stats.fenceReleases.Add(1)
			c.release(it.s)
		default:
			keep = append(keep, it)
		}
	}
	l.mu.Lock()
	l.items = append(l.items, keep...)
	n := len(l.items)
	l.mu.Unlock()
	return n
}
