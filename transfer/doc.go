// Package transfer moves bytes between host memory and a CUDA device at
// close to the speed of pinned memory, whatever memory the caller holds.
//
// A Copier (New) is bound to one device context and one pinpool.Pool. Its
// ToDevice and FromDevice take an ordinary Go []byte and pick the path by
// the memory and its size; ToDeviceAsync and FromDeviceAsync run the same
// on another goroutine and return a Transfer to wait on (a pinpool.Fence),
// cancellable through their context. Register page-locks existing memory for
// a scope; MappedPointer serves zero-copy.
//
// # Paths
//
// The reference figures below were measured once on an H200 SXM host (PCIe
// Gen5 x16, driver 580, CUDA 13, 16 cores); they set the defaults and must
// be re-measured on the machine at hand (BenchmarkTransfer and
// BenchmarkCrossover in this package, scripts/ref/memcpy_bw.cu for the CUDA C
// ceiling, all run by scripts/gpu-check.sh).
//
//   - Pinned (PathPinned): memory that is already page-locked, such as a
//     pool buffer (ToDeviceBuffer, or any slice cuda.IsPinned accepts), goes
//     as one asynchronous copy with no staging. It is the ceiling: 55 GB/s
//     each way from 16 MiB on (the link carries about 63 GB/s), 101 GB/s
//     with both directions at once; smaller copies pay a fixed cost: 0.94 /
//     11.8 / 44.6 / 51.4 GB/s at 4 KiB / 64 KiB / 1 MiB / 3 MiB, and about
//     7 µs for a 4 KiB copy and its wait. Keep data that moves often in pool
//     buffers.
//   - Staged (PathStaged): ordinary (pageable) memory of at least
//     Options.DirectBelow bytes is cut into chunks of Options.ChunkSize
//     (2 MiB), claimed in order by Options.Workers lanes (up to 8
//     goroutines, the caller among them). A lane owns each chunk it claims
//     from start to end, the same way in both directions: it takes a pinned
//     staging buffer from the pool, within a window of Options.WindowBytes
//     (32 MiB) for the whole copier so that little memory is locked at once,
//     copies the chunk into it (host to device), queues one asynchronous
//     copy and an event on the direction's stream, and goes on to its next
//     chunk; with a few chunks in flight it completes its oldest: waits for
//     the event, copies the chunk out (device to host) and gives the buffer
//     back to the pool. No lane waits for
//     another, CPU copies overlap each other and the DMA, and the small
//     window keeps the staging memory in the last-level cache. The driver's
//     own copy of pageable memory reaches only 6–9 GB/s host to device and
//     13–17 GB/s device to host on the reference host; staging moved
//     42.6–44.7 and 48.5–49.1 GB/s there at 256 MiB (BenchmarkStagedTuning,
//     three runs) and 35 and 42 GB/s at 64 MiB, the CPU copy being the
//     limit (one core copies about 6 GB/s in that VM).
//   - Direct (PathDirect): pageable memory below Options.DirectBelow (1 MiB)
//     goes through the driver's synchronous copy, which does its own staging:
//     for small sizes the fixed cost dominates every path, so staging gains
//     nothing. BenchmarkCrossover measures the crossover.
//   - Registered (PathRegistered): memory passed to Register is page-locked
//     for as long as the Registration is open; copies of any range inside it
//     go directly, at the pinned speed, split at the boundaries of its
//     registered parts, since the driver refuses (CUDA_ERROR_INVALID_VALUE)
//     a copy that spans two registrations. Registering costs about 0.23 ms
//     for 3 MiB and 43 ms for 1 GiB of touched memory, and unregistering
//     synchronises the device: register large buffers that are reused many
//     times, not per copy.
//
// The path a copy takes is reported by Copier.PathOf and counted, per
// direction, in Copier.Stats, with the bytes, the time, the staging waits and
// the achieved bandwidth.
//
// # Mapped zero-copy
//
// A pool over mapped memory (cudahost.Options{Mapped: true}, which needs
// the can-map-host-memory attribute, cuda.Properties.CanMapHostMemory) gives buffers
// that kernels read and write in place through MappedPointer: no copy at
// all, each byte crossing the bus when a kernel touches it. It wins on
// integrated GPUs that share the host's memory (Jetson: the attribute
// integrated is set, and there is no bus to cross), and on discrete GPUs for
// small data or data read once, where a copy followed by a kernel would move
// the bytes the same once but with an extra step and its latency. Data
// read several times belongs in device memory. pinpool bench measures the
// mapped kind beside the others on the machine at hand (on the H200 host,
// 51-52 GB/s at 256 MiB against 55 for pinned copies).
//
// # Safety
//
// The engine never hands an asynchronous copy memory that is not
// page-locked, never reuses a staging buffer before the event recorded after
// its copy has completed, and on cancellation or failure stops issuing
// chunks and waits for those in flight before it returns, so that no DMA
// runs into memory that was given back. Close waits for the transfers in
// flight, unregisters what is still registered, and destroys the streams and
// events.
package transfer
