// Package seedpool is a faithful Go reproduction of the seed design that
// pinpool starts from: the C++ CudaMemoryPool written for NVIDIA Jetson, and
// the multi-threaded test that came with it. It is the in-repo baseline that
// pinpool's real pool is benchmarked against, side by side in the same run.
// It is not a product: keep it simple, and keep its performance character.
//
// # The seed design, as reproduced by [Pool]
//
//   - One mutex guards everything.
//   - A map from exact size to a free list of blocks of that size
//     (the seed's unordered_map<size_t, list<uint8_t*>>). No size classes:
//     every distinct size has its own list. The lists are used as stacks
//     (last freed, first reused); the seed's std::list order does not change
//     any count or figure measured here.
//   - On a miss, [Options.GrowCount] (default 4) blocks of exactly the asked
//     size are allocated from the [Allocator] while the mutex is held; one is
//     returned and the rest are kept idle. Allocating under the lock is the
//     seed's behaviour and is kept on purpose: a ~1 ms cudaHostAlloc then
//     stalls every other caller of every size, and it is one of the things
//     the real pool is measured against.
//   - On free, the block is pushed back; if more than [Options.MaxIdle]
//     (default 32) blocks of that size are idle, the excess is freed through
//     the Allocator, also under the lock, like the seed.
//
// # Seed defects that are NOT copied
//
//   - Endless retry loop when allocation fails: the seed loops on
//     cudaMallocHost until it succeeds. [Pool.Alloc] stops at the first failed
//     Allocator call and returns its error when no block was obtained.
//   - free of an unknown pointer passed straight to cudaFreeHost: [Pool.Free]
//     checks that the block came from this pool and is outstanding (a map of
//     outstanding block pointers, under the same mutex) and returns
//     [ErrUnknown] otherwise; a size that does not match the block's returns
//     [ErrSizeMismatch].
//   - destroy that frees the idle blocks but does not clear the lists, so a
//     second destroy (or a later alloc) touches freed memory: [Pool.Destroy]
//     clears the lists, and a second Destroy is harmless.
//
// The fourth seed defect, no protection against reusing a block that an
// asynchronous copy is still using, is a property of the design and is left
// as is: the baseline has no fences. The outstanding-block map makes each
// Alloc/Free pair pay one extra map insert and delete that the seed did not;
// that is the price of the unknown-pointer check.
//
// # The seed workload
//
// [Workload] is the seed's test as a reusable driver: several goroutines
// (default 10), each getting, holding and releasing a 1080p NV12 frame
// ([FrameSize] bytes) a number of times (default 100), with a sleep between
// get and release that grows with the iteration. It takes a get callback, so
// the same driver runs this baseline ([Pool.Get]), pinpool's pool, or a raw
// allocator ([AllocatorGet]).
package seedpool
