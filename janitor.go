package pinpool

import (
	"time"
)

// janitor is the pool's background goroutine: it polls fences of pending
// buffers, frees idle memory by the idle policy (decay.go) and
// drops stale cache entries. After Close it polls the fences still pending
// for at most Options.CloseWait, then ends. All backend frees of the
// policy happen here (or in Trim and Close), never in Get or Release of an
// open pool.
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
	pollMin      = 20 * time.Microsecond  // first fence poll interval
	pollMax      = 2 * time.Millisecond   // poll interval after backing off, while open
	pollMaxClose = 100 * time.Millisecond // ... after Close
)

func (p *Pool) runJanitor() {
	j := &p.jan
	defer close(j.done)
	idle := time.NewTicker(p.opt.idleTick())
	defer idle.Stop()
	pressure := time.NewTimer(pressureTick)
	defer pressure.Stop()
	poll := pollMin
	pollT := time.NewTimer(time.Hour)
	pollT.Stop()
	defer pollT.Stop()
	for {
		var pollC <-chan time.Time
		if p.core.pending.len() > 0 {
			pollT.Reset(poll)
			pollC = pollT.C
		}
		select {
		case <-j.kickCh:
			poll = pollMin
			p.pollPending(true)
		case <-pollC:
			if p.pollPending(true) > 0 {
				poll = min(poll*2, pollMax)
			}
		case now := <-idle.C:
			p.pollPending(true)
			p.ageIdle(now)
			for _, c := range p.classList() {
				c.cache.clean()
			}
		case <-pressure.C:
			pressure.Reset(p.relievePressure())
		case <-j.stopCh:
			p.drainAfterClose()
			return
		}
	}
}

// drainAfterClose polls the fences still pending after Close, backing off
// to pollMaxClose, until none is left or Options.CloseWait has passed;
// completed buffers are freed as they come back. Buffers whose fence never
// completes stay allocated (the device may still use them): Stats counts
// them as pending, and a later Trim polls them again. One drain runs at a
// time.
func (p *Pool) drainAfterClose() {
	if !p.draining.CompareAndSwap(false, true) {
		return
	}
	var deadline time.Time
	if p.opt.CloseWait >= 0 {
		deadline = time.Now().Add(p.opt.CloseWait)
	}
	for {
		poll := pollMin
		for p.pollPending(true) > 0 {
			if !deadline.IsZero() && time.Now().After(deadline) {
				p.draining.Store(false)
				return
			}
			time.Sleep(poll)
			poll = min(poll*2, pollMaxClose)
		}
		p.draining.Store(false)
		// A fence added after the last poll but before the flag was
		// cleared would be stranded: look again.
		if p.core.pending.len() == 0 || !p.draining.CompareAndSwap(false, true) {
			return
		}
	}
}
