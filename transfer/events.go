package transfer

import (
	"sync"
	"sync/atomic"
)

// events recycles the copier's events: creating one is a driver call, and a
// staged transfer records one per chunk.
type events struct {
	dev  device
	mu   sync.Mutex
	free []event
}

// get returns an idle event or makes one.
func (p *events) get() (event, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		e := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return e, nil
	}
	p.mu.Unlock()
	return p.dev.newEvent()
}

// put gives back an event that has completed (or was never recorded).
func (p *events) put(e event) {
	p.mu.Lock()
	p.free = append(p.free, e)
	p.mu.Unlock()
}

// drop destroys an event whose state is unknown (after a failure).
func (p *events) drop(e event) { e.destroy() }

// close destroys every idle event.
func (p *events) close() error {
	p.mu.Lock()
	free := p.free
	p.free = nil
	p.mu.Unlock()
	var first error
	for _, e := range free {
		if err := e.destroy(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Fence states.
const (
	fencePending int32 = iota
	fenceDone
	fenceFailed
)

// stageFence is the pinpool.Fence a host-to-device staging buffer is
// released with. It asks the chunk's event until the engine has seen the
// event complete; from then on it answers by itself, so the engine may
// recycle (re-record) or destroy the event while the pool still holds the
// fence.
type stageFence struct {
	ev    event
	state atomic.Int32
	err   error // set before state becomes fenceFailed
}

// Done implements pinpool.Fence.
func (f *stageFence) Done() (bool, error) {
	switch f.state.Load() {
	case fenceDone:
		return true, nil
	case fenceFailed:
		return true, f.err
	}
	ok, err := f.ev.Done()
	// The engine may have decided, and recycled the event, meanwhile: its
	// verdict wins over what the (possibly re-recorded) event said.
	if f.state.Load() != fencePending {
		return f.Done()
	}
	return ok, err
}

func (f *stageFence) done() { f.state.Store(fenceDone) }

func (f *stageFence) fail(err error) {
	f.err = err
	f.state.Store(fenceFailed)
}

// failedFence reports an error, so that the pool retires the buffer: the
// device's use of it is unknown.
type failedFence struct{ err error }

func (f failedFence) Done() (bool, error) { return true, f.err }
