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
//     no registration covers; a range of staged size it calls pageable is
//     remembered as such for a second, so memory that other code pins
//     meanwhile is staged, correctly, until then.)
//   - Direct (PathDirect): pageable memory below Options.DirectBelow goes
//     through the driver's synchronous copy, which stages it itself: for
//     small copies the fixed costs dominate every path.
//   - Staged (PathStaged): larger pageable memory goes through pinned
//     staging buffers from the pool, within a window of
//     Options.WindowBytes per direction, so that little memory is locked
//     at once. Up to Options.Lanes lanes work on a staged transfer: the
//     calling goroutine and standing lanes of the copier, which has a set
//     of them per direction, as it has a window per direction: the two
//     directions run on separate copy engines, and one way's transfers
//     neither wait for the other's staging nor take its lanes. A small
//     transfer runs cooperatively (every lane copies stripes of every
//     chunk, and one goroutine at a time calls the driver); a large one
//     runs chunked (each lane takes whole chunks through staging on its
//     own). One function, planStaging, decides which, and the sizes.
//
// The path of most bytes of a copy is reported by Copier.PathOf and
// counted, per direction, in Copier.Stats, with the bytes, the time, the
// staging waits and the achieved bandwidth.
//
// The defaults of Options were chosen by measurement on a PCIe Gen5 host;
// the figures, the benchmarks of this package that re-measure them
// (BenchmarkStagedSizes, BenchmarkFrameStream, BenchmarkPacedFrames,
// BenchmarkTransfer), and the CPU time that staging costs beside the
// driver's own copy are in docs/results/2026-12-01-paced-frames.md,
// docs/results/2026-12-01-paced-round-trips.md (downloads and round trips),
// docs/results/2026-12-01-staged-bound.md (the bound of a staged copy on
// that host, and downloads back to back),
// docs/results/2026-12-01-transfer-shape.md and
// docs/results/2026-11-30-transfers-at-scale.md.
//
// # Reading the package
//
// A transfer goes through five steps, each in its own file:
//
//  1. dispatch (dispatch.go): the public copy methods, the split of host
//     memory into segments, and each segment's path;
//  2. plan (plan.go): how a staged segment runs: mode, chunk size, lanes;
//  3. run (staged.go, coop.go): the lanes of the chunked and the
//     cooperative mode;
//  4. issue (issue.go): every asynchronous copy and the event after it;
//     host to device, a chunked transfer's chunks go out in pairs, one
//     driver batch each, when the stream has work queued, and one by one
//     from the first batch a driver refuses (batch.go);
//  5. complete (complete.go): waiting for events, copying out, giving the
//     staging back; device to host, the lanes share the copy-out of a
//     chunked transfer's last chunks (share.go).
//
// Beside them: the standing lanes, the state a transfer's lanes share and
// the one busy wait (lanes.go), the window of staging slots (window.go),
// the events and private streams recycled (events.go, quick.go),
// registrations (register.go), the copier itself and its lock order
// (copier.go), and the low-level copies (copybytes.go, ntcopy_*.go).
//
// One word per idea: a transfer is one call; a segment is a range of its
// host memory held by one kind of memory; a chunk is the bytes of one
// staged asynchronous copy; a staging buffer (one window slot) holds one
// chunk, or several small ones; a stripe is the part of a cooperative
// chunk (or of a shared copy-out) one lane copies at a time; a lane is a
// goroutine working on a staged transfer.
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
