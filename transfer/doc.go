// Package transfer moves bytes between host memory and a CUDA device at
// close to the speed of pinned memory, whatever memory the caller holds.
//
// A Copier (New) is bound to one device context and one pinpool.Pool. Its
// ToDevice and FromDevice take an ordinary Go []byte and move each part of
// it the way its memory allows; ToDeviceAsync and FromDeviceAsync run the
// same on another goroutine and return a Transfer to wait on (a
// pinpool.Fence), cancellable through their context. Register page-locks
// existing memory for a scope; MappedPointer serves zero-copy.
//
// # Paths
//
// A transfer's host memory is cut into segments, each held by one kind of
// memory, and each segment takes a path (Path):
//
//   - Registered (PathRegistered): memory inside a Registration of the
//     copier goes directly, one asynchronous copy per registered part it
//     covers, since the driver refuses a copy that spans two registrations
//     or runs past one's end. A slice may cover several registrations and
//     unregistered memory around them.
//   - Pinned (PathPinned): memory that is already page-locked, such as a
//     pool buffer (ToDeviceBuffer, or any slice cuda.IsPinned accepts), goes
//     as one asynchronous copy with no staging: the ceiling. Keep data that
//     moves often in pool buffers. (The driver is asked about memory that
//     no registration covers, at every copy.)
//   - Direct (PathDirect): pageable memory below Options.DirectBelow goes
//     through the driver's synchronous copy, which stages it itself: for
//     small copies the fixed costs dominate every path.
//   - Staged (PathStaged): larger pageable memory goes through pinned
//     staging buffers from the pool, within a window of
//     Options.WindowBytes per direction, so that little memory is locked
//     at once. Up to Options.Lanes goroutines work on a staged transfer:
//     the calling goroutine and standing lanes of the copier, which has a
//     set of them per direction, as it has a window per direction: the two
//     directions run on separate copy engines, and one way's transfers
//     neither wait for the other's staging nor take its lanes. A transfer
//     that fits in a share of the window is cut into small chunks whose
//     CPU copies all lanes share, so that its first DMA starts early and
//     its last ends soon after the last CPU copy; a larger one gives each
//     lane whole chunks to take through staging on its own.
//
// The path of most bytes of a copy is reported by Copier.PathOf and
// counted, per direction, in Copier.Stats, with the bytes, the time, the
// staging waits and the achieved bandwidth.
//
// The defaults of Options were chosen by measurement on a PCIe Gen5 host.
// The benchmarks of this package re-measure them on the machine at hand
// beside the driver's own copy of the same memory: BenchmarkTransfer
// (sizes, both ways), BenchmarkStagedSizes, BenchmarkFrameStream (a
// 1080p frame from 1 and 10 goroutines), BenchmarkPacedFrames (a paced
// stream, with the CPU time per frame), BenchmarkBothWays and
// BenchmarkAfterPause.
//
// # Mapped zero-copy
//
// A pool over mapped memory (cudahost.Options{Mapped: true}, which needs
// the can-map-host-memory attribute, cuda.Properties.CanMapHostMemory)
// gives buffers that kernels read and write in place through
// MappedPointer: no copy at all, each byte crossing the bus when a kernel
// touches it. It wins on integrated GPUs that share the host's memory
// (Jetson: the attribute integrated is set, and there is no bus to cross),
// and on discrete GPUs for small data or data read once, where a copy
// followed by a kernel would move the bytes the same once but with an
// extra step and its latency. Data read several times belongs in device
// memory. pinpool bench measures the mapped kind beside the others on the
// machine at hand.
//
// # Safety
//
// The engine never hands an asynchronous copy memory that is not
// page-locked or that leaves its allocation or registration, never reuses
// a staging buffer before the event issued after its copy has completed,
// and on cancellation or failure stops issuing chunks and waits for those
// in flight before it returns, so that no DMA runs into memory that was
// given back. Close waits for the transfers in flight, unregisters what is
// still registered, and destroys the streams and events.
package transfer
