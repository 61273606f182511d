//go:build !race

package pinpool

// ownerLock is empty without the race detector: pinning alone makes one
// goroutine at a time the user of a processor's private cache (race.go).
type ownerLock struct{}

func (*ownerLock) lock()   {}
func (*ownerLock) unlock() {}
