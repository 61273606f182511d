package hostmem

// Options tunes a mapping. The zero value maps normal pages, binds to no NUMA
// node and prefaults with the default number of workers. Whether the memory
// is locked is decided by the constructor, not by an option: Map returns an
// unlocked (but prefaulted) region, Alloc a locked one.
type Options struct {
	// HugePages asks for transparent huge pages with madvise(MADV_HUGEPAGE)
	// and aligns regions of at least one huge page to the huge page size.
	// It is best effort: Region.HugePages reports whether the kernel
	// accepted the advice (it does not guarantee that every page is huge).
	HugePages bool

	// BindNUMA binds the region to NUMANode with mbind(MPOL_BIND) before the
	// first touch, so every page is allocated on that node. When false,
	// NUMANode is ignored and the kernel's default policy applies.
	BindNUMA bool

	// NUMANode is the node to bind to when BindNUMA is set (0, 1, ...).
	NUMANode int

	// PrefaultWorkers is the number of goroutines that fault the pages in
	// after mapping, each on its own part of the region. Zero or negative means min(GOMAXPROCS, 8). Small
	// regions use fewer workers (each worker gets at least 1 MiB).
	PrefaultWorkers int
}
