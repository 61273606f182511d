package pinpool

import "github.com/pinpool/pinpool/hostmem"

// systemLook returns the guard's look at this machine: MemAvailable from
// /proc/meminfo, and the cgroup's limit and headroom, the cgroup's files
// found once and read again at every look.
func systemLook() memLook {
	cg, err := hostmem.NewCgroupReader("/")
	if err != nil {
		cg = nil // no cgroup memory controller to read: the system guard alone
	}
	return func() memView {
		v := memView{avail: -1}
		if mi, err := hostmem.ReadMemInfo(); err == nil {
			v.avail = int64(mi.Available)
		}
		if cg != nil {
			if m, err := cg.Read(); err == nil && m.Limit > 0 {
				v.cg = cgroupView{limit: m.Limit, room: m.Headroom(), mem: m}
			}
		}
		return v
	}
}
