package pinpool

import (
	"sync"
	"sync/atomic"
	_ "unsafe" // go:linkname
)

// runtimeProcPin returns the index of the P (logical processor) the calling
// goroutine runs on and disables preemption until runtimeProcUnpin. The pool
// uses it only to choose a shard: a goroutine that moves right after still
// gets a correct, if less local, shard.
//
//go:linkname runtimeProcPin runtime.procPin
func runtimeProcPin() int

//go:linkname runtimeProcUnpin runtime.procUnpin
func runtimeProcUnpin()

// shard is one processor's cache of idle buffers of one size class. Get and
// Release on a processor touch only its shard, so they do not contend with
// other processors; the mutex is almost always uncontended and its cache
// line stays with that processor.
//
// The private slot holds one idle buffer that Get and Release exchange with
// a single atomic operation and no lock: the common case of a goroutine that
// gets and releases one buffer at a time. Others (steal, trim, stats) take
// it with the same atomic swap.
//
// Shards keep no counters: the hit count is derived from the slots'
// generations (see Stats), so the fast path pays for nothing but the
// exchange itself.
type shard struct {
	private atomic.Pointer[slot]
	mu      sync.Mutex
	stack   []*slot // idle buffers, most recently released last
	low     int     // smallest len(stack) since the janitor last looked
	_       [64]byte
}

// procShard returns the shard of the calling goroutine's processor.
func procShard(shards []shard) *shard {
	pid := runtimeProcPin()
	runtimeProcUnpin()
	return &shards[uint(pid)%uint(len(shards))]
}
