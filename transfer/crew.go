package transfer

import (
	"runtime"
	"sync"
	"time"
)

// crew is a copier's standing lanes: Workers-1 goroutines that run lanes
// of staged transfers beside the goroutine that called the transfer. After
// a transfer, each keeps looking for the next one for LaneSpin before it
// sleeps: waking a sleeping goroutine costs a thread wake-up, which on the
// lent H200 VMs took about 70 µs (BenchmarkStagedTimeline: the second
// lane of a 3 MB transfer started 71 µs after the first), a third of the
// whole transfer, while a spinning lane starts within a microsecond.
type crew struct {
	jobs chan job
	spin time.Duration
	quit chan struct{}
	wg   sync.WaitGroup
}

// newCrew starts n lane goroutines that spin for spin (none when it is not
// positive) before they sleep.
func newCrew(n int, spin time.Duration) *crew {
	w := &crew{jobs: make(chan job, max(n, 1)), spin: spin, quit: make(chan struct{})}
	for range n {
		w.wg.Go(w.work)
	}
	return w
}

// work runs lanes of the transfers it is offered until stop.
func (w *crew) work() {
	for {
		r, ok := w.next()
		if !ok {
			return
		}
		r.join()
	}
}

// next returns the next transfer offered to the crew, polling for it for
// w.spin before it waits; ok is false once the crew is stopped.
func (w *crew) next() (j job, ok bool) {
	if w.spin > 0 {
		deadline := time.Now().Add(w.spin)
		for {
			select {
			case r := <-w.jobs:
				return r, true
			case <-w.quit:
				return nil, false
			default:
			}
			if time.Now().After(deadline) {
				break
			}
			runtime.Gosched()
		}
	}
	select {
	case r := <-w.jobs:
		return r, true
	case <-w.quit:
		return nil, false
	}
}

// job is a transfer offered to the crew: join runs a lane of it, or
// nothing when the transfer's caller has finished its own lane.
type job interface{ join() }

// offer asks for up to n lanes for r without waiting: it returns once the
// offers are queued or the queue is full (the lanes busy with other
// transfers); lanes that take an offer after r's caller has finished its
// own lane drop it.
func (w *crew) offer(r job, n int) {
	for range n {
		select {
		case w.jobs <- r:
		default:
			return
		}
	}
}

// stop ends the lane goroutines and waits for them; transfers must be
// over.
func (w *crew) stop() {
	close(w.quit)
	w.wg.Wait()
}
