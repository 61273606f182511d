package transfer

import (
	"context"
	"sync/atomic"
	"time"
)

// window bounds the staging buffers held by all transfers of a copier: a
// counting semaphore of slots, one per staging buffer of ChunkSize bytes.
// A slot is taken before a buffer is got from the pool and given back only
// after the copy that used the buffer has completed, so the pinned staging
// memory in flight never exceeds slots*ChunkSize <= WindowBytes.
type window struct {
	tokens chan struct{}
	chunk  int64

	held, peak atomic.Int64 // slots held now, most ever
	waits      atomic.Uint64
	waitNanos  atomic.Int64
}

func newWindow(slots, chunk int) *window {
	return &window{tokens: make(chan struct{}, slots), chunk: int64(chunk)}
}

// acquire takes a slot, waiting while all are held until ctx is done.
func (w *window) acquire(ctx context.Context) error {
	select {
	case w.tokens <- struct{}{}:
	default:
		w.waits.Add(1)
		t0 := time.Now()
		select {
		case w.tokens <- struct{}{}:
			w.waitNanos.Add(int64(time.Since(t0)))
		case <-ctx.Done():
			w.waitNanos.Add(int64(time.Since(t0)))
			return ctx.Err()
		}
	}
	w.taken()
	return nil
}

// taken counts a slot just taken.
func (w *window) taken() {
	h := w.held.Add(1)
	for {
		p := w.peak.Load()
		if h <= p || w.peak.CompareAndSwap(p, h) {
			return
		}
	}
}

// tryAcquire takes a slot if one is free, without waiting.
func (w *window) tryAcquire() bool {
	select {
	case w.tokens <- struct{}{}:
	default:
		return false
	}
	w.taken()
	return true
}

// release gives a slot back.
func (w *window) release() {
	w.held.Add(-1)
	<-w.tokens
}
