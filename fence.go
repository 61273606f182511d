package pinpool

import (
	"fmt"
	"reflect"
	"sync"
)

// Fence tells when an asynchronous operation that uses a buffer has
// finished. Buffer.ReleaseAfter takes one: the buffer goes back to the pool
// only once Done reports true. A *cuda.Event recorded on a stream after an
// asynchronous copy is a Fence.
//
// Done must not block. If it returns an error, the pool cannot know whether
// the device still uses the memory, so it retires the buffer: the memory is
// freed once nothing else in its chunk is in use, and never handed out again.
type Fence interface {
	Done() (bool, error)
}

// FenceFunc adapts a function to the Fence interface.
type FenceFunc func() (bool, error)

// Done calls f.
func (f FenceFunc) Done() (bool, error) { return f() }

// pendingList holds buffers released with a fence that has not yet
// reported done.
type pendingList struct {
	mu    sync.Mutex
	items []pendingItem
}

type pendingItem struct {
	s   *slot
	gen uint64 // the slot's generation while pending
	f   Fence
}

func (l *pendingList) add(it pendingItem) {
	l.mu.Lock()
	l.items = append(l.items, it)
	l.mu.Unlock()
}

func (l *pendingList) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items)
}

// nilFence reports whether f cannot be called: a nil interface, or a nil
// function, pointer, map, channel or slice behind it.
func nilFence(f Fence) bool {
	if f == nil {
		return true
	}
	if ff, ok := f.(FenceFunc); ok {
		return ff == nil
	}
	switch v := reflect.ValueOf(f); v.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Chan, reflect.Slice, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}

// askFence calls f.Done, turning a panic into an error.
func askFence(f Fence) (done bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			done, err = false, fmt.Errorf("%w: Done panicked: %v", ErrInvalidFence, r)
		}
	}()
	return f.Done()
}

// pollPending asks every pending fence once, without blocking on any:
// done buffers go back to their class, failed (or panicking) ones are
// retired. It returns how many are still pending. Only one poll runs at a
// time; a concurrent caller returns -1 at once (block == false) or waits
// its turn.
func (p *Pool) pollPending(block bool) int {
	if block {
		p.pollMu.Lock()
	} else if !p.pollMu.TryLock() {
		return -1
	}
	defer p.pollMu.Unlock()
	l := &p.core.pending
	l.mu.Lock()
	items := l.items
	l.items = nil
	l.mu.Unlock()
	var keep []pendingItem
	for _, it := range items {
		done, err := askFence(it.f)
		c := it.s.chunk.class
		switch {
		case err != nil:
			c.pending.Add(-1)
			c.retire(it.s, it.gen)
		case done:
			c.pending.Add(-1)
			p.core.fenceReleases.Add(1)
			c.returnIdle(it.s, it.gen)
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

// retire takes a pending slot out of use for good after its fence failed:
// the device may still touch it. Its chunk is freed once every other slot
// of it is idle or retired.
func (c *class) retire(s *slot, gen uint64) {
	s.state.Store(word(gen, stRetired))
	c.core.fenceErrors.Add(1)
	c.freeChunk(s.chunk, TrimFenceError)
}
