package measure

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/hostmem"
)

// lockedBackend is the host backend as RLIMIT_MEMLOCK would bound it to
// allowance bytes: it says so to the pool (LockAllowance) and records the
// most bytes allocated at once, as the kernel would count them.
type lockedBackend struct {
	pinpool.Backend
	allowance int64
	mu        sync.Mutex
	live, max int64
}

func (b *lockedBackend) LockAllowance() (int64, bool) { return b.allowance, true }

func (b *lockedBackend) Alloc(size int) (pinpool.Allocation, error) {
	a, err := b.Backend.Alloc(size)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.live += int64(size)
	b.max = max(b.max, b.live)
	b.mu.Unlock()
	return &countedAllocation{Allocation: a, b: b, size: int64(size)}, nil
}

type countedAllocation struct {
	pinpool.Allocation
	b    *lockedBackend
	size int64
}

func (a *countedAllocation) Free() error {
	a.b.mu.Lock()
	a.b.live -= a.size
	a.b.mu.Unlock()
	return a.Allocation.Free()
}

// TestPoolPairsFitTheLockLimit: under a lock limit both pools of the pool
// benchmark warm within the one allowance. Before, pinpool's pool cut its
// allocation to the whole allowance and the seed pool's warm-up failed in
// mlock: bench skipped the pool benchmark under any limit below 8 MiB.
func TestPoolPairsFitTheLockLimit(t *testing.T) {
	needLockable(t, 512<<10) // the largest allowance below must be lockable for real
	for _, allowance := range []int64{0, 64 << 10, 512 << 10} {
		b := &lockedBackend{Backend: pinpool.NewHostBackend(hostmem.Options{}), allowance: allowance}
		p := Plan{PoolSize: 4 << 10, PoolGoroutines: []int{1, 2}}
		pin, seed, closeAll, err := poolPairs(p, b)
		if allowance == 0 {
			// No locking allowed: the warm-up is refused with the limit.
			if !errors.Is(err, pinpool.ErrBudget) || !strings.Contains(err.Error(), "RLIMIT_MEMLOCK") {
				t.Fatalf("allowance 0: %v, want the lock limit's refusal", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("allowance %d: %v", allowance, err)
		}
		for _, pair := range []getRelease{pin, seed, pin, seed} {
			if err := pair(); err != nil {
				t.Fatalf("allowance %d: %v", allowance, err)
			}
		}
		closeAll()
		if b.max > allowance {
			t.Errorf("allowance %d: the pools held %d bytes at once", allowance, b.max)
		}
	}
}
