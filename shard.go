package pinpool

import (
	"sync"
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
type shard struct {
	mu    sync.Mutex
	stack []*slot // idle buffers, most recently released last
	low   int     // smallest len(stack) since the janitor last looked
	gets  uint64  // Get calls that looked here
	hits  uint64  // ... and found a buffer here
	_     [64]byte
}

// procShard returns the shard of the calling goroutine's processor.
func procShard(shards []shard) *shard {
	pid := runtimeProcPin()
	runtimeProcUnpin()
	return &shards[uint(pid)%uint(len(shards))]
}
