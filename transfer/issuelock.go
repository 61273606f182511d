package transfer

import (
	"runtime"
	"sync/atomic"
)

// issueLock serialises the staged lanes' driver calls (the asynchronous
// copy and the event record of a chunk) without ever putting a lane to
// sleep. The driver serialises those calls anyway, behind a lock whose
// waiters sleep in the kernel: on the lent H200 VMs, 8 lanes that each had
// their 389 KB chunk of a 3 MB frame ready within 54 µs finished queuing
// them only at 114 µs (BenchmarkStagedTimeline), while one call takes
// about 5 µs. A lane waiting here yields its processor to other goroutines
// but keeps its thread awake, and takes the lock within a microsecond of
// its release.
type issueLock struct{ held atomic.Bool }

func (l *issueLock) lock() {
	for !l.held.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
}

func (l *issueLock) unlock() { l.held.Store(false) }
