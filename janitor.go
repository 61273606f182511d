package pinpool

import (
	"time"
)

// janitor is the pool's background goroutine: it polls fences of pending
// buffers, frees idle memory beyond MaxIdle or unused for IdleTimeout, and,
// after Close, lives until no fence is pending. All backend frees of the
// policy happen here (or in Trim), never in Get or Release.
type janitor struct {
	kickCh chan struct{}
	stopCh chan struct{}
	done   chan struct{}
}

// kick asks the janitor to run soon; it never blocks.
func (j *janitor) kick() {
	select {
	case j.kickCh <- struct{}{}:
	default:
	}
}

const (
	pollMin = 20 * time.Microsecond // first fence poll interval
	pollMax = 2 * time.Millisecond  // poll interval after backing off
)

func (p *Pool) runJanitor() {
	j := &p.jan
	defer close(j.done)
	tick := p.opt.IdleTimeout / 4
	if p.opt.IdleTimeout < 0 {
		tick = time.Second
	}
	tick = min(max(tick, 10*time.Millisecond), time.Second)
	idle := time.NewTimer(tick)
	defer idle.Stop()
	poll := pollMin
	pollT := time.NewTimer(time.Hour)
	pollT.Stop()
	defer pollT.Stop()
	stopping := false
	for {
		var pollC <-chan time.Time
		if n := p.pending.len(); n > 0 {
			pollT.Reset(poll)
			pollC = pollT.C
		} else if stopping {
			return
		}
		select {
		case <-j.kickCh:
			poll = pollMin
			p.pollPending(true)
			p.enforceMaxIdle()
		case <-pollC:
			if p.pollPending(true) > 0 {
				poll = min(poll*2, pollMax)
			}
		case <-idle.C:
			p.pollPending(true)
			p.enforceMaxIdle()
			p.ageIdle(time.Now())
			idle.Reset(tick)
		case <-j.stopCh:
			stopping = true
			j.stopCh = nil
		}
	}
}

// enforceMaxIdle frees idle buffers beyond Options.MaxIdle in every class.
func (p *Pool) enforceMaxIdle() {
	if p.opt.MaxIdle < 0 || p.closed.Load() {
		return
	}
	for _, c := range p.classList() {
		keep := max(p.opt.MaxIdle, int(c.reserved.Load()))
		if c.idleCount() > keep {
			c.trim(-1, keep, nil)
		}
	}
}

// ageIdle frees, per class, the idle buffers that were never needed during
// the last IdleTimeout: the smallest number of idle buffers seen in that
// window (the low watermark, tracked by Get) was not used at all.
func (p *Pool) ageIdle(now time.Time) {
	if p.opt.IdleTimeout < 0 || p.closed.Load() {
		return
	}
	for _, c := range p.classList() {
		c.mu.Lock()
		low := c.low
		c.low = len(c.free)
		idle := len(c.free)
		for i := range c.shards {
			sh := &c.shards[i]
			sh.mu.Lock()
			low += sh.low
			sh.low = len(sh.stack)
			idle += len(sh.stack)
			if sh.private.Load() != nil {
				idle++
			}
			sh.mu.Unlock()
		}
		c.mu.Unlock()
		if c.windowStart == 0 {
			c.windowStart, c.windowLow = now.UnixNano(), low
			continue
		}
		c.windowLow = min(c.windowLow, low)
		if now.UnixNano()-c.windowStart < int64(p.opt.IdleTimeout) {
			continue
		}
		if c.windowLow > 0 {
			keep := max(idle-c.windowLow, int(c.reserved.Load()))
			c.trim(int64(c.windowLow)*c.size, keep, nil)
		}
		c.windowStart, c.windowLow = now.UnixNano(), idle
	}
}

// drainLate polls fences of buffers released with ReleaseAfter after Close,
// when the janitor may have exited: one goroutine at a time polls until
// nothing is pending.
func (p *Pool) drainLate() {
	if !p.lateDrain.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			poll := pollMin
			for p.pollPending(true) > 0 {
				time.Sleep(poll)
				poll = min(poll*2, pollMax)
			}
			p.lateDrain.Store(false)
			// A buffer added after the last poll but before the flag was
			// cleared would be stranded: look again.
			if p.pending.len() == 0 || !p.lateDrain.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}
