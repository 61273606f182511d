//go:build race

package pinpool

import "sync"

// ownerLock gives the race detector the order between goroutines that use
// one processor's private cache in turn. Without the detector the order
// comes from pinning (one goroutine per P at a time) and the lock is empty
// (norace.go); with it, an uncontended mutex records the hand-over. Only
// the pinned goroutine takes it, so it never blocks.
type ownerLock struct{ mu sync.Mutex }

func (o *ownerLock) lock()   { o.mu.Lock() }
func (o *ownerLock) unlock() { o.mu.Unlock() }
