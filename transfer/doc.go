// Package transfer moves bytes between host memory and a CUDA device at close to the speed of
// pinned memory, whatever memory the caller holds.
//
// A Copier (New) is bound to one device context and one pinpool.Pool. Its ToDevice and FromDevice
// take an ordinary Go []byte and move each part of it the way its memory allows; ToDeviceAsync and
// FromDeviceAsync run the same on another goroutine and return a Transfer to wait on (a
// pinpool.Fence), cancellable through their context. Register page-locks existing memory for a
// scope; MappedPointer serves zero-copy.
//
// # Paths
//
// A transfer's host memory is cut into segments, each held by one kind of memory, and each segment
// takes a path (Path):
//
//   - Registered (PathRegistered): memory inside a Registration of the copier goes directly, one
//     asynchronous copy per registered part it covers, since the driver refuses a copy that spans
//     two registrations or runs past one's end. A slice may cover several registrations and
//     unregistered memory around them.
//   - Pinned (PathPinned): memory that is already page-locked, such as a pool buffer
//     (ToDeviceBuffer, or any slice cuda.IsPinned accepts), goes as one asynchronous copy with no
//     staging: the ceiling. Keep data that moves often in pool buffers. (The driver is asked about
//     memory that no registration covers, at every copy.)
//   - Direct (PathDirect): pageable memory below Options.DirectBelow goes through the driver's
//     synchronous copy, which stages it itself: for small copies the fixed costs dominate every
//     path.
//   - Staged (PathStaged): larger pageable memory goes through pinned staging buffers from the
//     pool, within a window of Options.WindowBytes per direction. Up to Options.Lanes goroutines
//     work on it: the caller and the copier's standing lanes, a set per direction, as the two
//     directions run on separate copy engines. A transfer that fits a share of the window is cut
//     into small chunks whose CPU copies all lanes share; a larger one gives each lane whole chunks
//     of its own.
//
// Streams (ToDeviceFrom, FromDeviceTo) and files (ToDeviceFromFile, FromDeviceToFile) move through
// the same staging and lanes in pieces of Options.ChunkSize, each read or written straight into or
// out of its staging buffer (a file's pieces in the page cache with pread, the others with
// O_DIRECT), and count as one transfer under PathStream.
//
// The path of most bytes of a copy is reported by Copier.PathOf and counted, per direction, in
// Copier.Stats, with the bytes, the time, the staging waits and the achieved bandwidth.
//
// The defaults of Options were chosen by measurement on a PCIe Gen5 host. The benchmarks of this
// package re-measure them on the machine at hand beside the driver's own copy of the same memory:
// BenchmarkTransfer (sizes, both ways), BenchmarkStagedSizes, BenchmarkFrameStream (a 1080p frame
// from 1 and 10 goroutines), BenchmarkPacedFrames (a paced stream, with the CPU time per frame),
// BenchmarkBothWays and BenchmarkAfterPause.
//
// # Mapped zero-copy
//
// A pool over mapped memory (cudahost.Options{Mapped: true}; see cuda.Properties.CanMapHostMemory)
// gives buffers that kernels use in place through MappedPointer, each byte crossing the bus when
// touched. It wins on integrated GPUs (Jetson), and on discrete ones only for small data or data
// read once; pinpool bench measures it on the machine at hand.
//
// # Safety
//
// The engine never hands an asynchronous copy memory that is not page-locked or that leaves its
// allocation or registration, never reuses a staging buffer before the event issued after its copy
// has completed, and on cancellation or failure stops issuing chunks and waits for those in flight
// before it returns, so that no DMA runs into memory that was given back. Close waits for the
// transfers in flight, unregisters what is still registered, and destroys the streams and events.
package transfer
