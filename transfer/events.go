package transfer

import "sync"

// events recycles the copier's events: creating one is a driver call, and a
// staged transfer records one per chunk.
type events struct {
	dev  device
	mu   sync.Mutex // a leaf of the lock order (see Copier)
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

// failedFence reports an error, so that the pool retires the buffer: the
// device's use of it is unknown.
type failedFence struct{ err error }

func (f failedFence) Done() (bool, error) { return true, f.err }
