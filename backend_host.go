package pinpool

import (
	"fmt"

	"github.com/pinpool/pinpool/hostmem"
)

// HostBackend allocates real locked memory without a GPU: anonymous mmap,
// parallel prefault and mlock (package hostmem), with optional huge pages and
// NUMA binding. It is the backend when no CUDA driver is found, and what
// tests use. Its memory is not mapped into any device.
type HostBackend struct {
	opt hostmem.Options
}

// NewHostBackend returns a host backend with the given mapping options.
func NewHostBackend(opt hostmem.Options) *HostBackend { return &HostBackend{opt: opt} }

// Name is "host(mlock)", with the options that are set.
func (h *HostBackend) Name() string {
	n := "host(mlock"
	if h.opt.HugePages {
		n += ",hugepages"
	}
	if h.opt.BindNUMA {
		n += fmt.Sprintf(",numa=%d", h.opt.NUMANode)
	}
	return n + ")"
}

// Alloc maps, prefaults and locks size bytes.
func (h *HostBackend) Alloc(size int) (Allocation, error) {
	r, err := hostmem.Alloc(size, h.opt)
	if err != nil {
		return nil, err
	}
	huge, _ := r.HugePageBytes() // 0 when unknown
	return hostAllocation{r, huge}, nil
}

// LockAllowance is how many more bytes this process may lock (RLIMIT_MEMLOCK
// less what it has locked), and whether anything bounds it (not with
// CAP_IPC_LOCK or an unlimited limit). A pool on this backend reads it at
// New and keeps within it, as within a Budget.
func (h *HostBackend) LockAllowance() (bytes int64, limited bool) {
	n, limited, err := hostmem.LockAllowance()
	if err != nil || !limited {
		return 0, false
	}
	return int64(min(n, uint64(MaxSize))), true
}

// lockBounded is implemented by backends whose memory counts against
// RLIMIT_MEMLOCK (HostBackend).
type lockBounded interface {
	LockAllowance() (bytes int64, limited bool)
}

type hostAllocation struct {
	r    *hostmem.Region
	huge int64
}

func (a hostAllocation) HugePageBytes() int64 { return a.huge }

func (a hostAllocation) Bytes() []byte { return a.r.Bytes() }
func (a hostAllocation) Free() error   { return a.r.Unmap() }
func (a hostAllocation) DevicePointer() (uintptr, error) {
	return 0, ErrNotMapped
}
