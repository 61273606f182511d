package pinpool

import (
	"slices"
	"sync"
)

// reserveClaims is what Reserve asks a class to keep idle. A Reserve in
// progress claims its count at once (so that the policy and other sizes'
// growth do not free what it is growing), and when it ends the claim
// either becomes part of what the class keeps (success) or goes away
// (failure). Several Reserves of one size may overlap and fail in any
// order; the class keeps the largest count among those that succeeded
// and those still in progress, and nothing of those that failed.
type reserveClaims struct {
	mu         sync.Mutex
	kept       int64   // the largest count of a Reserve that succeeded; Trim resets it
	inProgress []int64 // counts of the Reserves in progress
}

// claimReserve records a Reserve of count buffers in progress and returns
// the function that ends it: done(true) keeps the claim, done(false) drops
// it.
func (c *class) claimReserve(count int64) (done func(ok bool)) {
	rc := &c.claims
	rc.mu.Lock()
	rc.inProgress = append(rc.inProgress, count)
	c.publishClaims()
	rc.mu.Unlock()
	return func(ok bool) {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if i := slices.Index(rc.inProgress, count); i >= 0 {
			rc.inProgress = slices.Delete(rc.inProgress, i, i+1)
		}
		if ok {
			rc.kept = max(rc.kept, count)
		}
		c.publishClaims()
	}
}

// dropKept forgets what Reserves that succeeded asked to keep (Trim);
// Reserves still in progress keep their claims.
func (c *class) dropKept() {
	rc := &c.claims
	rc.mu.Lock()
	rc.kept = 0
	c.publishClaims()
	rc.mu.Unlock()
}

// publishClaims stores the count the class keeps, for the trimmers that
// read it without the lock. The caller holds claims.mu.
func (c *class) publishClaims() {
	n := c.claims.kept
	for _, k := range c.claims.inProgress {
		n = max(n, k)
	}
	c.reserved.Store(n)
}
