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
//     Options.DirectBelow bytes goes through pinned staging buffers from
//     the pool, within a window of Options.WindowBytes (32 MiB) for the
//     whole copier, so that little memory is locked at once. Up to
//     Options.Workers lanes work on a transfer: the calling goroutine and
//     standing lanes of the copier, which keep looking for work for
//     Options.LaneSpin after a transfer (a sleeping thread took about 70 µs
//     to wake on the lent VMs). A large transfer is cut into chunks of
//     Options.ChunkSize (2 MiB) and a lane owns each chunk it claims from
//     start to end, the same way in both directions: it copies the chunk
//     into a staging buffer (host to device), queues one asynchronous copy
//     and an event, goes on to its next chunk, and with a few in flight
//     completes its oldest: waits for the event, copies the chunk out
//     (device to host) and gives the buffer back. A small transfer (up to
//     16 MiB, in 1 MiB pieces) is staged cooperatively instead: every lane
//     copies a slice of every piece, with non-temporal stores, and the
//     driver is called by one goroutine at a time, since per-chunk driver
//     calls from many threads and DMA from memory still in the CPU caches
//     cost small transfers most of their time. On the 2-GPU H200 host
//     (2026-11-30, BenchmarkStagedVsPageable, the driver's pageable copy
//     timed in the same iterations) staging moved a 3 MB frame at 22.3 GB/s
//     host to device (25.2 in a stream of transfers) against 13.7 for the
//     driver, and 13.6 device to host against 9.6; 64 MiB at 38.0 and 36.6
//     GB/s; 256 MiB at 45.9 and 45.5 (pinned: 55). Two GPUs at once staged
//     86.4 GB/s host to device, 2.04 times one alone (BenchmarkAllGPUs).
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
