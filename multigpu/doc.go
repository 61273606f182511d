// Package multigpu gives the library its shape on a host with several GPUs:
// one shared pool that serves every device, one copier per device, and each
// device's staging memory on the host NUMA node nearest to it.
//
// # The shape
//
// Open(devices, Options) returns a Set of:
//
//   - one shared pool (Set.Pool) for the application's own buffers. Its
//     memory comes from a cudahost backend on the first device with
//     Portable set, which the driver documents as what makes pinned memory
//     pinned for every context of the process (TestGPUSharedBufferEveryDevice
//     checks that memory pinned by device 0's backend copies to device 1).
//     A buffer from it goes to any device of the set in one asynchronous copy (transfer.PathPinned: Copier.ToDeviceBuffer, or
//     ToDevice of its bytes).
//   - per device, a transfer.Copier that stages ordinary Go memory through
//     a staging pool of its own: a cudahost backend on that device, a pool
//     whose budget is exactly the copier's two windows, one per direction
//     (Options.Transfer's WindowBytes each, 32 MiB by default), one of them
//     reserved when the set opens.
//   - per device, a Placement (Place): the staging bound to the node the
//     device reports as nearest (the attribute HOST_NUMA_ID,
//     cuda.Properties.HostNUMAID) when it reports one, the host shows that
//     node and the device can register host memory; and the copier's lanes
//     (transfer.Options.Lanes): the CPUs of that node shared among the
//     devices on it, at most transfer.DefaultMaxLanes.
//
// # Why
//
// Each GPU's DMA engine reads its own staging buffers, so those belong on
// the node the GPU hangs off: a DMA read from the other socket's memory
// crosses the inter-socket link, and so does a lane's write into it. Pinned
// memory needs no staging: the DMA reads it where it is, one touch per
// byte. A staged byte costs three: a core reads it from the source, writes
// it into staging, and the DMA reads it from there. The cores are the
// staged path's cost: one lane copies far less than a PCIe Gen5 link
// carries, so a copier needs several lanes to keep up with one link.
// Staging to two GPUs at once moves about twice one GPU host to device,
// because the lanes' writes and the DMA's reads of a window stay in the
// last-level cache; device to host it stops at the host's own ceiling for
// the copy out, below what pinned copies reach: with many GPUs the host's
// memory bandwidth and cores are the limit, not the links. Keep data that
// moves often in the shared pool. Transfer's BenchmarkAllGPUs measures
// each GPU alone, all at once, pinned, and the host-copy ceiling side by
// side; docs/performance.md has its figures.
//
// # Eight GPUs
//
// Written on paper; no host with eight GPUs or two NUMA nodes was lent, so
// none of this was run. A host like a DGX H100 has eight GPUs, four on each
// of two sockets (HOST_NUMA_ID 0,0,0,0,1,1,1,1), and 56 cores per socket.
//
// What limits it. Pinned copies to eight links at once need the links'
// whole bandwidth from host memory; staged copies touch each byte three
// times, beyond what two sockets of DDR5 deliver, so staged traffic to all
// eight at once is bounded by host memory, not by the GPUs. Cores come
// next: at a lane's copy rate (transfer's BenchmarkHostCopy) eight links
// need more than half the cores copying flat out. And staging on the wrong
// node sends every staged byte across the inter-socket link twice (the
// lane's write, the DMA's read), which carries far less than the memory.
//
// What the engine does about it. Each copier gets the cores of its node
// shared among the devices on that node (56 / 4 = 14 on such a host, capped
// at transfer.DefaultMaxLanes: more lanes did not stage faster in
// transfer's BenchmarkStagedTuning), so the copiers
// of one node together never ask for more lanes than it has cores, and
// every device keeps at least one. Each device has one staging window of
// its own per direction (32 MiB by default), small enough to
// stay in the last-level cache, so the DMA's read of a chunk the lane just
// wrote often comes from the cache rather than memory. Each window is bound
// to the device's HOST_NUMA_ID node (cudahost's Register method with
// BindNUMA), so that the staging write and the DMA read stay on the GPU's
// socket.
//
// What it does not do. Go cannot pin a goroutine to a node's cores, so a
// lane may run on the other socket and read its source across the link;
// the source's placement is the application's (first touch). The shared
// pool's memory lies where its first device's backend touched it, so
// pinned copies to GPUs of the other socket cross the link; a shared pool
// per node would avoid that, and is not built. What the tests cover: the
// placement logic, with recorded attributes of an eight-GPU two-node host,
// a 2-GPU one-node host, drivers before CUDA 12.2, a device without host
// registration and a node absent from the host, and a fuzz target over
// random attributes and hosts; on a 2-GPU host with one NUMA node, the GPU
// tests run round trips on both devices at once, staged and from the shared
// pool, and the fallback to unbound staging when binding to an absent node
// fails. Binding to any node but 0 has never run.
package multigpu
