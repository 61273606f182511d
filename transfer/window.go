package transfer

import (
	"context"
	"sync/atomic"
	"time"
)

// window bounds the staging buffers held by a copier's transfers in one
// direction: a counting semaphore of slots, one per staging buffer of
// ChunkSize bytes. A slot is taken before a buffer is got from the pool
// and given back only after the copy that used the buffer has completed,
// so the pinned staging memory in flight in one direction never exceeds
// slots*ChunkSize <= WindowBytes.
//
// Each direction has a window of its own, as it has standing lanes of its
// own (Copier.lanes): the two directions run on separate copy engines,
// and transfers both ways at once that shared one window and one set of
// lanes moved far less than a copier per direction (BenchmarkBothWays).
type window struct {
	tokens chan struct{}
	held   *heldSlots // shared by the copier's windows

	waits     atomic.Uint64
	waitNanos atomic.Int64
}

// heldSlots counts the slots held in a copier's windows together, now and
// at most, for Stats.
type heldSlots struct{ now, peak atomic.Int64 }

func newWindow(slots int, held *heldSlots) *window {
	return &window{tokens: make(chan struct{}, slots), held: held}
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
	h := w.held.now.Add(1)
	for {
		p := w.held.peak.Load()
		if h <= p || w.held.peak.CompareAndSwap(p, h) {
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
	w.held.now.Add(-1)
	<-w.tokens
}
