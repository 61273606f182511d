package pinpool

import (
	"math"
	"time"
)

// The idle policy. Memory is given back by decay, not at a cliff: a fixed
// cap of idle buffers trimmed as soon as it is exceeded frees, at every
// dip of a load that breathes, the memory its next peak allocates again,
// and every allocation and free takes the driver's locks (BenchmarkBurst's
// seed-cliff case measures the storm it makes).
//
// So the janitor watches each allocation (chunk): the sum of its slots'
// generations moves whenever one of its buffers is handed out and
// released. An allocation is unused since the first look at which it was
// all idle with the sum unchanged. Then, per class:
//
//   - decay: while the class has more idle buffers than MaxIdle (and what
//     Reserve keeps), allocations unused for the class's decay time are
//     freed, until at most MaxIdle idle buffers are left;
//   - idle timeout: allocations unused for IdleTimeout are freed, down to
//     what Reserve keeps;
//   - a class that has to grow again within its decay time after a decay
//     free doubles its decay time (up to maxDecay): its load comes back
//     at a slower rhythm than the decay assumed.

// maxDecay is the longest decay time a class adapts to: IdleTimeout, or 16
// times IdleDecay when there is no idle timeout.
func (o *Options) maxDecay() time.Duration {
	if o.IdleTimeout > 0 {
		return max(o.IdleTimeout, o.IdleDecay)
	}
	if o.IdleDecay > math.MaxInt64/16 {
		return math.MaxInt64
	}
	return 16 * o.IdleDecay
}

// idleTick is how often the janitor looks at idle memory: a quarter of the
// shortest of IdleDecay and IdleTimeout, within [10 ms, 1 s].
func (o *Options) idleTick() time.Duration {
	d := time.Second
	for _, v := range []time.Duration{o.IdleDecay, o.IdleTimeout} {
		if v > 0 {
			d = min(d, v/4)
		}
	}
	return max(d, 10*time.Millisecond)
}

// ageIdle updates every chunk's unused time and frees what the policy
// says: by decay above MaxIdle, and after IdleTimeout, sparing what
// Reserve asked to keep.
func (p *Pool) ageIdle(now time.Time) {
	if p.core.isClosed() {
		return
	}
	t := now.UnixNano()
	for _, c := range p.classList() {
		oldest := int64(-1) // longest unused time of an all-idle chunk
		idle := 0           // the class's idle buffers, read on the way
		for _, ch := range c.chunkList() {
			var sum uint64
			all := true
			for i := range ch.slots {
				w := ch.slots[i].state.Load()
				sum += genOf(w)
				if !freeableState(stateOf(w)) {
					all = false
				}
				if idleState(stateOf(w)) {
					idle++
				}
			}
			if !all || sum != ch.genSum || ch.unusedSince == 0 {
				ch.genSum, ch.unusedSince = sum, t
				continue
			}
			oldest = max(oldest, t-ch.unusedSince)
		}
		if oldest < 0 {
			continue
		}
		keep := int(c.reserved.Load())
		if to := int64(p.opt.IdleTimeout); to > 0 && oldest >= to {
			c.trimClass(trimPlan{want: -1, keep: keep, reason: TrimIdleTimeout, pick: unusedFor(t, to)})
		}
		// idle may be stale after the timeout's trim: trimClass counts again
		// under the lock before it frees anything.
		if d := c.decay.Load(); d > 0 && p.opt.MaxIdle >= 0 && oldest >= d && idle > max(keep, p.opt.MaxIdle) {
			c.trimClass(trimPlan{want: -1, keep: max(keep, p.opt.MaxIdle), below: true, floor: keep, reason: TrimDecay, pick: unusedFor(t, d)})
		}
	}
}

// unusedFor picks the chunks unused for at least d nanoseconds at t.
func unusedFor(t, d int64) func(*chunk) bool {
	return func(ch *chunk) bool { return ch.unusedSince != 0 && t-ch.unusedSince >= d }
}

// regrown adapts the class's decay time after a growth for a Get at t: a
// class that grows again within its decay time after a decay free was
// freed too early, so its decay time doubles, up to maxDecay.
func (c *class) regrown(t int64, maxDecay time.Duration) {
	last := c.decayed.Load()
	d := c.decay.Load()
	if last == 0 || d <= 0 || t-last > d {
		return
	}
	if c.decayed.CompareAndSwap(last, 0) { // once per decay free
		next := int64(maxDecay)
		if d <= next/2 {
			next = 2 * d
		}
		c.decay.Store(max(next, d))
	}
}
