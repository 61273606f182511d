// Package transfer moves bytes between host memory and a CUDA device at close to the speed of
// pinned memory, whatever memory the caller holds.
//
// A Copier (New) is bound to one device context and one pinpool.Pool. Its ToDevice and FromDevice
// take an ordinary Go []byte and move each part of it the way its memory allows; ToDeviceAsync and
// FromDeviceAsync do the same on another goroutine and return a Transfer (a pinpool.Fence).
// Register page-locks existing memory for a scope. MappedPointer serves zero-copy: kernels use
// the buffers of a pool over mapped memory (cudahost.Options{Mapped: true}) in place, each byte
// crossing the bus when touched, which wins on integrated GPUs (Jetson), on discrete ones only for
// small data or data read once (pinpool bench measures it).
//
// # Paths
//
// A transfer's host memory is cut into segments of one kind of memory each, and each takes a Path:
//
//   - PathRegistered: memory inside a Registration goes as one asynchronous copy per registered
//     part it covers, since the driver refuses a copy that spans two registrations.
//   - PathPinned: memory already page-locked, such as a pool buffer (ToDeviceBuffer, or any slice
//     cuda.IsPinned accepts), goes as one asynchronous copy with no staging: the ceiling. Keep data
//     that moves often in pool buffers. Memory the driver called pageable stays staged for a second
//     after, even if other code pins it meanwhile.
//   - PathDirect: pageable memory below Options.DirectBelow goes through the driver's synchronous
//     copy: for small copies the fixed costs dominate every path.
//   - PathStaged: larger pageable memory goes through pinned staging buffers from the pool, within
//     a window of Options.WindowBytes per direction, copied by up to Options.Lanes goroutines: the
//     caller and the copier's standing lanes (a set per direction). A transfer that fits a share of
//     the window is cut into small chunks whose CPU copies all lanes share; a larger one gives each
//     lane whole chunks of its own.
//
// Streams (ToDeviceFrom, FromDeviceTo) and files (ToDeviceFromFile, FromDeviceToFile) move through
// the same staging and lanes in pieces of Options.ChunkSize, read or written straight into or out
// of staging, each call counted as one transfer under PathStream. Copier.PathOf reports a copy's
// path and Copier.Stats counts the transfers per direction and path.
//
// The defaults of Options were measured on a PCIe Gen5 host; the package's benchmarks re-measure
// them beside the driver's own copy: BenchmarkTransfer, BenchmarkStagedSizes, BenchmarkFrameStream
// (a 1080p frame from 1 and 10 goroutines), BenchmarkPacedFrames (a paced stream, with the CPU time
// per frame), BenchmarkBothWays and BenchmarkAfterPause.
//
// # Safety
//
// The engine never hands an asynchronous copy memory that is not page-locked or that leaves its
// allocation or registration, never reuses a staging buffer before the event after its copy has
// completed, and on cancellation or failure waits for the copies in flight before it returns, so
// that no DMA runs into memory that was given back. Close waits for the transfers in flight,
// unregisters what is still registered, and destroys the streams and events.
package transfer
