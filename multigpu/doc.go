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
//     pinned for every context of the process; on the lent 2-GPU H200 host,
//     memory pinned by device 0's backend copied to device 1 at full pinned
//     speed. A buffer from it goes to any device of the set in one
//     asynchronous copy (transfer.PathPinned: Copier.ToDeviceBuffer, or
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
// staged path's cost: one lane copies about 6 GB/s on the H200 host, so a
// copier needs about eight to keep up with one PCIe Gen5 link (55 GB/s
// pinned). On the lent 2-GPU host (2026-11-30, transfer's
// BenchmarkAllGPUs), staging to both GPUs at once moved 83–86 GB/s host to
// device, twice one GPU alone, because the lanes' writes and the DMA's
// reads of a 32 MiB window stay in the last-level cache; device to host
// moved 63–74 GB/s, 1.5 times one GPU, at the host's own ceiling for the
// copy out (56–68 GB/s for the same copies with no GPU involved), while
// pinned copies moved 104–110 GB/s: with many GPUs the host's memory
// bandwidth and cores are the limit, not the links. Keep data that moves
// often in the shared pool.
//
// # Eight GPUs
//
// Written on paper; no host with eight GPUs or two NUMA nodes was lent, so
// none of this was run. A host like a DGX H100 has eight GPUs, four on each
// of two sockets (HOST_NUMA_ID 0,0,0,0,1,1,1,1), and 56 cores per socket.
//
// What limits it. The links could carry 8 × 55 = 440 GB/s each way. Pinned
// copies need 440 GB/s of host memory bandwidth for that; staged copies
// about three times as much, 1.3 TB/s, beyond what two sockets of DDR5
// deliver (some 300–600 GB/s each, by their memory channels), so staged
// traffic to all eight at once is bounded by host memory, not by the GPUs.
// Cores come next: 440 GB/s at about 6 GB/s per lane needs some 73 lanes
// copying flat out, more than half the cores. And staging on the wrong
// node sends every staged byte across the inter-socket link twice (the
// lane's write, the DMA's read), which carries far less than the memory.
//
// What the engine does about it. Each copier gets the cores of its node
// shared among the devices on that node (56 / 4 = 14, capped at 8: lanes
// beyond eight did not stage faster on the reference host), so the copiers
// of one node together never ask for more lanes than it has cores, and
// every device keeps at least one. Each device has one staging window of
// its own (32 MiB by default: 256 MiB pinned for eight), small enough to
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
// per node would avoid that, and is not built. What was tested: the
// placement logic, with recorded attributes of an eight-GPU two-node host,
// the lent 2-GPU one-node host, drivers before CUDA 12.2, a device without
// host registration and a node absent from the host (placement_test.go),
// and a fuzz target over random attributes and hosts. The Set itself ran
// on the lent 2-GPU H200 host (one NUMA node of 32 CPUs; both GPUs report
// HOST_NUMA_ID 0, so both stagings were bound to node 0 with 8 lanes
// each): round trips on both devices at once, staged and from the shared
// pool, and the fallback to unbound staging when binding to an absent node
// fails (gpu_test.go). Binding to any node but 0 has never run.
package multigpu
