// Package pinpool is a pool of pinned (page-locked) host memory for CUDA.
//
// Asynchronous copies between the host and a GPU need pinned memory, and
// copies from it run at the speed of the link; but pinning is slow (a
// cuMemHostAlloc of a few MiB costs about a millisecond, under a
// driver-wide lock) and unpinning synchronises the device. A Pool
// allocates pinned memory in large chunks through a Backend, carves them
// into buffers, and hands buffers out and takes them back without calling
// the driver. It is safe for concurrent use.
//
// # Buffers
//
// Pool.Get (which may wait) and Pool.TryGet (which never does) return a
// Buffer of the length asked, backed by a buffer of its size class: classes
// waste at most 12.5% above 32 KiB and under 0.8% above 1 GiB, or, with
// Options.Exact, every size rounded to whole pages is its own class.
// Buffer.Bytes is the memory, not zeroed, aligned to the system page size
// (os.Getpagesize: 4 KiB on x86-64, 4, 16 or 64 KiB on arm64) and a whole
// number of pages long: where pages are larger than 4 KiB, the classes below
// a page are rounded up to one, so that what the pool counts against its
// budget and the lock limit is what the kernel locks. Buffer.Release gives
// it back. A Buffer is a
// small handle, released exactly once: afterwards every copy of it is dead,
// and a second release returns ErrReleased even when the memory has been
// handed out again. Options.Debug poisons released memory to catch writes
// through stale slices.
//
// # The fast path
//
// Once the pool has served a size, Get and Release of it cost tens of
// nanoseconds and call no driver: idle buffers wait in per-processor caches,
// and a processor takes from and returns to its own with no lock, only a few
// plain loads and stores and the compare-and-swap that claims a buffer.
// Nothing is counted there; Pool.Stats derives hits from the buffers'
// generations.
//
// # Growth and budget
//
// When a size has no idle buffer, Get grows its class through the Backend,
// outside every lock that Get and Release need: buffers up to
// Options.SlabMax come many to a slab of Options.SlabSize, larger ones
// Options.GrowCount at a time (4, as the common C++ mutex-and-list pool),
// within Options.GrowBytes; a class that keeps missing grows in larger batches.
// A backend failure is returned (ErrGrow), never retried in a loop.
// Pool.Reserve grows ahead of time and keeps what it grew; a large one
// grows in allocations of up to 1 GiB whose buffers Gets can use at once,
// and Pool.ReserveContext can be cancelled and reports its progress. The
// CUDA backends pin a large allocation in bounded pieces, prefaulted on
// several goroutines a group of pieces at a time, then registered, so that
// the driver's lock is held for one piece at a time and other streams'
// copies go on.
//
// Options.Budget caps the bytes the pool holds: in use, idle and pending
// together. A Get that would exceed it first trims idle memory of other
// sizes, then waits for a release, its context or Close; TryGet and Reserve
// return ErrBudget instead, and a request larger than the whole budget fails
// at once. The system guard (Options.MinAvailable) refuses growth that would
// take the machine's available memory below a floor (ErrLowMemory, which is
// also ErrBudget), and on the host backend the RLIMIT_MEMLOCK allowance
// bounds the pool like a budget. Inside a container the guard also keeps
// growth under the cgroup's memory limit (locked pages count against it,
// and past it the kernel kills the process): a growth that would cross it
// waits or fails like an over-budget request, with the group, its limit
// and the fix in the error.
//
// # Giving memory back
//
// Every allocation and free of pinned memory takes the driver's locks and
// stalls the process's other CUDA calls, so the pool gives memory back by
// decay, not at a cliff. Idle buffers above Options.MaxIdle per class (32,
// the bound of the common C++ mutex-and-list pool) are freed, whole allocations at a time, once none of
// their allocation was handed out for the class's decay time
// (Options.IdleDecay, 5 seconds); a class that has to grow again soon after
// such a free doubles its decay time. So a load that breathes keeps the
// memory of its peak, and at rest at most MaxIdle buffers per class stay
// idle until Options.IdleTimeout (30 seconds) frees the rest. When the
// system's or the cgroup's headroom falls below Options.MinAvailable, the
// pool frees its idle memory (all but what Reserve keeps) at its next look
// at the headroom: every 50 ms while a headroom is within four times its
// floor, every 500 ms while all are further, so a fall from far above the
// floor is met up to half a second later; a growth the floor refuses frees
// the other classes' idle memory at once. Pool.Trim frees it at once.
// Stats.TrimsBy counts the frees by reason.
//
// # Fences
//
// A buffer that an asynchronous copy still reads or writes must not be
// reused. Buffer.ReleaseAfter releases it with a Fence, such as the
// *cuda.Event recorded on the stream after the copy (FenceFunc adapts a
// function): the buffer is pending, never handed out, until the fence's
// Done reports true, which the pool polls in the background. A fence whose
// Done fails or panics retires the buffer: the device may still use it, so
// it is never handed out again and is freed with the rest of its
// allocation.
//
// # Stats
//
// Pool.Stats is a consistent snapshot, pool-wide and per size class: bytes
// held, in use, idle, pending and retired (which add up, within the
// budget), gets, hits and misses (which add up), growth and its time, trims,
// fence outcomes and backend failures. Counters never go back. Package
// metrics exports them to Prometheus.
//
// # Close
//
// Pool.Close frees the idle memory, wakes every waiting Get with ErrClosed,
// and makes Get, TryGet and Reserve return ErrClosed from then on; releases
// keep working. Buffers still handed out are freed when they are released,
// and pending buffers once their fence completes, which the pool keeps
// polling for Options.CloseWait. A backend that the pool made itself (zero
// Options.Backend) is closed with it; one given in Options is the caller's
// to close, after the pool.
//
// # Backends
//
// The zero Options take DefaultBackend: when a CUDA driver and device are
// found, pinned memory of device 0 from package cudahost (mmap'd memory
// registered with cuMemHostRegister, or cuMemHostAlloc, whichever suits the
// device); otherwise locked host memory from NewHostBackend (mmap and mlock),
// so that programs and their tests run on machines without a GPU. Host
// memory is locked but unknown to the driver, so asynchronous copies refuse
// it. Options.Backend takes any other: CUDABackend over a cudahost.Backend
// of one's own options (mapped memory for zero-copy through
// Buffer.DevicePointer, write-combined memory, NUMA binding), or any type
// with the methods of Backend.
//
// Package transfer builds on a pool: it moves ordinary Go memory to and
// from a device at close to pinned speed, staging it through pool buffers.
// Package cuda is the driver binding underneath, loaded at run time without
// cgo.
package pinpool
