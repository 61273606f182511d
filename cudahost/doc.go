// Package cudahost provides the two CUDA backends of the pool: pinned
// (page-locked) host memory made with cuMemHostAlloc, or with mmap plus
// cuMemHostRegister. A Backend (New) retains one device's primary context and
// hands out Chunks (Backend.Alloc): large, page-aligned allocations that the
// pool carves into buffers, that asynchronous copies accept, and that can be
// mapped into the device's address space for zero-copy access.
//
// The package does not import the pool: Backend and Chunk have the methods
// of pinpool.Backend and pinpool.Allocation, except that Alloc returns the
// concrete *Chunk, so the pool wraps a Backend in a two-line adapter.
//
// # Methods and their cost
//
// HostAlloc calls cuMemHostAlloc. The driver maps the memory, zeroes it and
// pins it in one call that holds a driver-wide lock; cuMemFreeHost gives it
// back. It is the only method with write-combined memory and the only one on
// integrated GPUs below compute capability 7.2.
//
// Register maps anonymous memory (hostmem.MapLazy: optional NUMA binding,
// and huge pages: the hugetlb pool when enough are reserved, else
// transparent huge pages), and pins it with cuMemHostRegister in pieces of
// at most Options.RegisterChunk bytes, each registered in calls sized, at
// the previous registration's rate, to hold the driver's lock about 0.75 ms
// (a piece on small pages takes several). Options.PrefaultWorkers goroutines
// fault the pages of a group of pieces in (Options.RegisterGroup, 64 MiB by
// default), then Options.RegisterWorkers goroutines register the group's
// pieces, then the next group is prefaulted: prefault and registration take
// turns, since with both at once other streams' copies waited for
// milliseconds; a registration refused for its size is retried in halves
// (Backend.SplitRetries). Backend.AllocContext stops between pieces
// when its context is done and reports progress. Free unregisters the
// pieces on several goroutines and gives each one's pages back as it goes.
// Package cuda's copies cut a copy that spans pieces at their boundaries.
// Only Register has read-only memory, huge pages and NUMA binding.
//
// A HostAlloc chunk is one driver call for its whole size: Backend.GrowLimit
// (Options.HostAllocChunk) tells the pool to grow it in bounded
// allocations.
//
// Registering memory that is already touched is several times faster than
// cuMemHostAlloc of the same size; the prefault that touches it costs too
// (the kernel zeroes every page, spread over the prefault workers), so the
// whole Register grow is the sum of both. BenchmarkGrow measures Alloc plus
// Free of both methods side by side on the machine at hand
// (docs/performance.md has the figures of the reference host). Transfers
// from either kind of memory run at the same pinned speed.
//
// # Choosing a method
//
// Options.Method's zero value, Auto, picks Register when the device reports
// host-register support (Properties.HostRegisterSupported) and is not an
// integrated GPU below compute capability 7.2, and HostAlloc otherwise.
// Options that only one method has decide instead: WriteCombined picks
// HostAlloc; ReadOnly, HugePages and BindNUMA pick Register. Choose
// HostAlloc explicitly for write-combined upload buffers, and Register
// (Auto does) for large pools that grow often, for huge pages, or to place
// memory on the NUMA node next to the GPU. NUMA binding is never implicit:
// set BindNUMA and NUMANode to Properties().HostNUMAID (when >= 0) to get
// it.
//
// # Jetson and other integrated GPUs
//
// Integrated GPUs share the host's memory. Below compute capability 7.2
// (Jetson TX1, TX2) pinned memory is not cached by the CPU, so CPU reads and
// writes of it are slow, and cuMemHostRegister is not supported (it needs
// the I/O coherency of 7.2 and later: Xavier, Orin); New refuses Register
// there with ErrUnsupported and Auto picks HostAlloc. On every integrated
// GPU a copy moves data within the same DRAM, so mapped memory (Options.Mapped,
// zero-copy through Chunk.DevicePointer) often beats copying it.
package cudahost
