package pinpool

import (
	"sync"
	"sync/atomic"
)

// budget counts the bytes the pool holds or is about to allocate, and
// enforces Options.Budget. It also wakes Get calls that wait for room:
// they wait on a channel that is closed (and replaced) whenever memory is
// released or freed.
type budget struct {
	waiters *atomic.Int32 // core.waiters, on the line Release reads
	limit   int64         // 0: none
	held    atomic.Int64  // written by growth and frees

	mu   sync.Mutex
	wake chan struct{}
}

// tryReserve adds n to the held bytes if that stays within the limit.
func (b *budget) tryReserve(n int64) bool {
	for {
		h := b.held.Load()
		if b.limit > 0 && h+n > b.limit {
			return false
		}
		if b.held.CompareAndSwap(h, h+n) {
			return true
		}
	}
}

// fit returns how many buffers of size bytes one growth should take when
// it would like k: k if they fit in the room the limit leaves, else unit
// (its smallest allocation), which the growth may make room for by
// trimming other sizes. Only the smallest growth evicts.
func (b *budget) fit(k, unit int, size int64) int {
	if b.limit <= 0 || int64(k)*size <= b.limit-b.held.Load() {
		return k
	}
	return unit
}

// release subtracts n bytes that are free again and wakes waiters.
func (b *budget) release(n int64) {
	b.held.Add(-n)
	b.broadcast()
}

// channel returns the channel the next broadcast closes. A waiter
// registers (waiters.Add) before it asks for the channel, so that no
// broadcast after its last look is lost.
func (b *budget) channel() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wake == nil {
		b.wake = make(chan struct{})
	}
	return b.wake
}

// broadcast wakes every waiter, if any.
func (b *budget) broadcast() {
	if b.waiters.Load() == 0 {
		return
	}
	b.mu.Lock()
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
	b.mu.Unlock()
}
