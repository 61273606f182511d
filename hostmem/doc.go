// Package hostmem provides page-locked host memory without a GPU: anonymous
// mmap, optional NUMA binding and transparent huge pages, a parallel
// prefault, and mlock. It is the host backend of the pool and the mapping
// half of the CUDA register backend, which takes a prefaulted [Map] region
// and registers [Region.Pointer] / [Region.Cap] with the driver.
//
// The real implementation is Linux only. On other systems every constructor
// returns an error wrapping [ErrUnsupported], so the package still builds.
//
// Locked memory counts against RLIMIT_MEMLOCK (see [LockLimit]) unless the
// process has CAP_IPC_LOCK; [LockedBytes] reports how much this process has
// locked (VmLck in /proc/self/status). Locked pages are charged to the
// process's cgroup as well and cannot be reclaimed, so past the cgroup's
// memory limit the kernel throttles or OOM-kills the process;
// [CgroupReader] reads that limit and the headroom it leaves
// ([ReadCgroupMemory] once).
package hostmem
