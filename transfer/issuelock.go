package transfer

import (
	"runtime"
	"sync/atomic"
)

// issueLock serialises the staged lanes' driver calls (the asynchronous
// copy and the event record of a chunk) without ever putting a lane to
// sleep. The driver serialises those calls anyway, and they grow slower
// when many threads make them at once: on the lent H200 VMs, 8 lanes that
// each had their 389 KB chunk of a 3 MB frame ready within 54 µs finished
// queuing them only at 114 µs (BenchmarkStagedTimeline), while one call
// takes about 5 µs. The lock alone did not shorten that (132 µs with it);
// it did help device-to-host copies (BenchmarkStagedVsPageable, same run:
// 64 MiB 38.2–39.6 GB/s against 34.9–35.2 without it, 8 MiB 20.0–20.4
// against 18.3–18.4). A lane waiting here yields its processor to other
// goroutines but keeps its thread awake.
type issueLock struct{ held atomic.Bool }

func (l *issueLock) lock() {
	for !l.held.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
}

func (l *issueLock) unlock() { l.held.Store(false) }
