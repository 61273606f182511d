package pinpool

import (
	"sort"
	"sync/atomic"
	"time"
)

// poolCounters are the pool-wide counters of the slow paths (atomics; the
// fast path counts in its shard instead).
type poolCounters struct {
	misses, grows, failures, trims atomic.Uint64
	fenceReleases, fenceErrors     atomic.Uint64
	budgetWaits, budgetRefusals    atomic.Uint64
	lowMemory                      atomic.Uint64
	bytesGrown, bytesTrimmed       atomic.Int64
	growNanos, maxGrowNanos        atomic.Int64
}

func (c *poolCounters) recordGrow(bytes int64, d time.Duration) {
	c.grows.Add(1)
	c.bytesGrown.Add(bytes)
	c.growNanos.Add(int64(d))
	for {
		m := c.maxGrowNanos.Load()
		if int64(d) <= m || c.maxGrowNanos.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// Stats is a snapshot of a pool's state and counters. Byte figures count
// buffer capacities (size classes), not the lengths asked of Get.
type Stats struct {
	Backend string // the backend's Name

	BytesHeld    int64 // allocated from the backend: in use + idle + pending + retired
	BytesInUse   int64 // handed out and not released
	BytesIdle    int64 // ready to hand out
	BytesPending int64 // released with a fence that has not completed
	BytesRetired int64 // retired after a fence error, freed with the rest of their chunk
	PeakHeld     int64 // highest BytesHeld so far
	Budget       int64 // Options.Budget; 0: none

	Gets   uint64 // Get and TryGet calls for a valid size on an open pool
	Hits   uint64 // ... served from idle memory without growing
	Misses uint64 // ... that had to grow the pool (served or not)

	Grows       uint64        // backend allocations
	BytesGrown  int64         // bytes allocated by them
	GrowTime    time.Duration // total time spent in backend allocations
	MaxGrowTime time.Duration // the slowest one

	Trims        uint64 // backend frees by policy, Trim or Close
	BytesTrimmed int64

	ReleasedAfterFence uint64 // buffers returned after their fence completed
	FenceErrors        uint64 // buffers retired because their fence failed
	Failures           uint64 // failed backend allocations
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
	BytesHeld   int64
	Gets, Hits  uint64
	Misses      uint64
	Grows       uint64
	PerAlloc    int   // buffers per backend allocation
	AllocBytes  int64 // bytes per backend allocation
}

// Stats returns a snapshot. It locks each size class briefly and walks its
// buffers: Get and Release count nothing themselves (hits are derived from
// the buffers' release generations), so reading stats costs the hot path
// nothing.
func (p *Pool) Stats() Stats {
	st := Stats{
		Backend:            p.backend.Name(),
		PeakHeld:           p.budget.peak.Load(),
		Budget:             p.budget.limit,
		Misses:             p.stats.misses.Load(),
		Grows:              p.stats.grows.Load(),
		BytesGrown:         p.stats.bytesGrown.Load(),
		GrowTime:           time.Duration(p.stats.growNanos.Load()),
		MaxGrowTime:        time.Duration(p.stats.maxGrowNanos.Load()),
		Trims:              p.stats.trims.Load(),
		BytesTrimmed:       p.stats.bytesTrimmed.Load(),
		ReleasedAfterFence: p.stats.fenceReleases.Load(),
		FenceErrors:        p.stats.fenceErrors.Load(),
		Failures:           p.stats.failures.Load(),
		BudgetWaits:        p.stats.budgetWaits.Load(),
		BudgetRefusals:     p.stats.budgetRefusals.Load(),
		LowMemoryRefusals:  p.stats.lowMemory.Load(),
	}
	for _, c := range p.classList() {
		cs := ClassStats{Size: c.size, PerAlloc: c.perChunk, AllocBytes: c.chunkBytes, Misses: c.misses.Load(), Grows: c.grows.Load()}
		c.mu.Lock()
		idle := int64(len(c.free))
		for i := range c.shards {
			sh := &c.shards[i]
			sh.mu.Lock()
			idle += int64(len(sh.stack))
			if sh.private.Load() != nil {
				idle++
			}
			sh.mu.Unlock()
		}
		cs.BuffersHeld = c.slots
		held := c.held
		released := c.pastGens // every release moved a generation by one
		for ch := range c.chunks {
			for i := range ch.slots {
				released += int64(ch.slots[i].gen.Load())
			}
		}
		c.mu.Unlock()
		cs.Idle = idle
		cs.Pending = c.pending.Load()
		cs.InUse = max(0, cs.BuffersHeld-cs.Idle-cs.Pending)
		served := uint64(released + cs.InUse) // handed out: released since, or still out
		cs.Hits = served - min(served, c.grewServed.Load())
		cs.Gets = served + c.failed.Load()
		cs.BytesHeld = cs.BuffersHeld * c.size
		st.BytesHeld += held
		st.BytesRetired += held - cs.BytesHeld
		st.Gets += cs.Gets
		st.Hits += cs.Hits
		st.BytesIdle += cs.Idle * c.size
		st.BytesPending += cs.Pending * c.size
		st.BytesInUse += cs.InUse * c.size
		st.Classes = append(st.Classes, cs)
	}
	sort.Slice(st.Classes, func(i, j int) bool { return st.Classes[i].Size < st.Classes[j].Size })
	return st
}
