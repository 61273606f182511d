package transfer

import "sync"

// maxQuickStreams bounds the private streams of one copier: synchronous
// copies beyond that many at once take the shared streams.
const maxQuickStreams = 64

// quickStreams lends streams to synchronous copies of one page-locked range.
// Such a copy is queued alone on a stream nobody else uses and waited for
// with a stream synchronize: the pattern of CUDA C (cudaMemcpyAsync then
// cudaStreamSynchronize), with no event to record and query and no wait
// behind other callers' copies on a shared stream. A stream is created on
// first need and kept for the next copy; the copy engines are chosen by
// direction, so one private stream serves both.
type quickStreams struct {
	dev  device
	mu   sync.Mutex // a leaf of the lock order (see Copier)
	free []stream
	live int // streams made and not destroyed, lent ones included
}

// get lends an idle stream, making one when there is none and fewer than
// maxQuickStreams live. ok is false when the caller should use the shared
// streams instead (at the bound, or the driver would not make a stream).
func (q *quickStreams) get() (s stream, ok bool) {
	q.mu.Lock()
	if n := len(q.free); n > 0 {
		s = q.free[n-1]
		q.free = q.free[:n-1]
		q.mu.Unlock()
		return s, true
	}
	if q.live >= maxQuickStreams {
		q.mu.Unlock()
		return nil, false
	}
	q.live++
	q.mu.Unlock()
	s, err := q.dev.newStream()
	if err != nil {
		q.mu.Lock()
		q.live--
		q.mu.Unlock()
		return nil, false
	}
	return s, true
}

// put gives back a lent stream with no work queued.
func (q *quickStreams) put(s stream) {
	q.mu.Lock()
	q.free = append(q.free, s)
	q.mu.Unlock()
}

// drop destroys a lent stream whose state is unknown (after a failure).
func (q *quickStreams) drop(s stream) {
	s.destroy()
	q.mu.Lock()
	q.live--
	q.mu.Unlock()
}

// close destroys the idle streams; none may be lent (Close waits for the
// transfers in flight first).
func (q *quickStreams) close() error {
	q.mu.Lock()
	free := q.free
	q.free = nil
	q.live -= len(free)
	q.mu.Unlock()
	var first error
	for _, s := range free {
		if err := s.destroy(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// quickCopy copies the page-locked host memory of o, which lies in one
// allocation or registration, on the private stream s and waits for it.
func (c *Copier) quickCopy(s stream, o op, path Path) error {
	if err := enqueueCopy(s, o.dir, o.dev, o.host); err != nil {
		c.quick.put(s) // nothing was queued: the stream is as it was
		return copyErr(o.dir, path, 0, len(o.host), err)
	}
	if err := s.synchronize(); err != nil {
		c.quick.drop(s)
		return copyErr(o.dir, path, 0, len(o.host), err)
	}
	c.quick.put(s)
	return nil
}
