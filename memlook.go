package pinpool

import (
	"sync"

	"github.com/pinpool/pinpool/hostmem"
)

// cgroupReader is the process's cgroup, found once and shared by every
// pool (they all run in the same group): it keeps a few cgroup files open
// for the life of the process, so that a look re-reads them without
// opening anything. Nil when there is no cgroup memory controller to read.
var cgroupReader = sync.OnceValue(func() *hostmem.CgroupReader {
	r, err := hostmem.NewCgroupReader("/")
	if err != nil {
		return nil // nothing to read: the system guard alone
	}
	return r
})

// systemLook returns the guard's look at this machine: MemAvailable from
// /proc/meminfo (when system: the system guard is on; else it stays
// unknown and is not read), and the cgroup's limit and headroom, which
// bound growth even with the guard off.
func systemLook(system bool) memLook {
	return func() memView {
		v := memView{avail: -1}
		if system {
			if mi, err := hostmem.ReadMemInfo(); err == nil {
				v.avail = int64(mi.Available)
			}
		}
		if cg := cgroupReader(); cg != nil {
			if m, err := cg.Read(); err == nil && m.Limit > 0 {
				v.cg = cgroupView{limit: m.Limit, room: m.Headroom(), mem: m}
			}
		}
		return v
	}
}
