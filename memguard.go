package pinpool

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinpool/pinpool/hostmem"
)

// The memory guard. Locked memory cannot be swapped out, and it counts
// against the cgroup the process runs in: a host that runs out of it
// freezes, and a container that crosses its memory limit is killed by the
// kernel. So growth is refused (like an over-budget request: Get waits,
// TryGet fails) when it would take either headroom below its floor:
//
//   - the system's MemAvailable, floor Options.MinAvailable (3% of
//     MemTotal by default);
//   - the cgroup's headroom, its tightest limit (memory.max, memory.high,
//     v1 memory.limit_in_bytes, over its nested groups) minus what it uses
//     that the kernel cannot drop; floor Options.MinAvailable when set,
//     else 3% of the limit. Even with the guard off (MinAvailable < 0)
//     growth never crosses the limit itself.
//
// And under pressure, when a headroom is below its floor whoever took the
// memory, the janitor frees the pool's idle memory within pressureTick
// (pressureTickFar when the headroom was more than nearFloor times the
// floor at its last look).

// How often the janitor looks at the headroom while the pool holds
// memory: every pressureTick while a headroom is within nearFloor times
// its floor, every pressureTickFar while all are further. A look is cheap,
// but waking for one 20 times a second whatever the headroom kept an idle
// process busy enough to show in the CPU time per frame of a paced stream
// (transfer's BenchmarkPacedFrames); far from the floor, a slower reaction
// costs nothing.
const (
	pressureTick    = 50 * time.Millisecond
	pressureTickFar = 500 * time.Millisecond
	nearFloor       = 4
)

// memView is one look at the headroom the guard protects.
type memView struct {
	avail int64 // the system's MemAvailable; < 0: unknown
	cg    cgroupView
}

// cgroupView is the process's cgroup as the guard sees it.
type cgroupView struct {
	limit int64                // the binding limit; 0: none
	room  int64                // headroom under it
	mem   hostmem.CgroupMemory // what was read, for messages
}

// memLook reads the headroom; the pool's is systemLook, tests set others.
type memLook func() memView

// guard holds what the memory guard needs.
type guard struct {
	minAvail int64 // the system floor in bytes; 0: off
	option   int64 // Options.MinAvailable as given (0: default, < 0: off)
	look     atomic.Pointer[memLook]
}

// init sets the guard up for the options: the floors and the way to look.
func (g *guard) init(minAvailable, memTotal int64) {
	g.option = minAvailable
	switch {
	case minAvailable > 0:
		g.minAvail = minAvailable
	case minAvailable == 0 && memTotal > 0:
		g.minAvail = memTotal / 100 * DefaultMinAvailablePercent
	}
	var l memLook = systemLook(g.minAvail > 0)
	g.look.Store(&l)
}

// cgroupFloor is the headroom the guard keeps under a cgroup limit.
func (g *guard) cgroupFloor(limit int64) int64 {
	switch {
	case g.option > 0:
		return min(g.option, limit)
	case g.option == 0:
		return limit / 100 * DefaultMinAvailablePercent
	}
	return 0
}

// check returns why growing by n bytes must not happen now (an error
// matching ErrLowMemory and ErrBudget), or nil.
func (g *guard) check(n int64) error {
	return g.checkView((*g.look.Load())(), n)
}

// checkView is check on the headroom v.
func (g *guard) checkView(v memView, n int64) error {
	if g.minAvail > 0 && v.avail >= 0 && v.avail-n < g.minAvail {
		return fmt.Errorf("%w: need %d bytes, MemAvailable %d, floor %d", ErrLowMemory, n, v.avail, g.minAvail)
	}
	if v.cg.limit > 0 {
		if floor := g.cgroupFloor(v.cg.limit); v.cg.room-n < floor {
			return &cgroupLimitError{need: n, room: v.cg.room, floor: floor, never: n > v.cg.limit-floor, desc: v.cg.mem.String()}
		}
	}
	return nil
}

// hopeless reports whether err is a guard refusal that no release or
// wait can lift: the request alone is more than the cgroup allows.
func hopeless(err error) bool {
	var ce *cgroupLimitError
	return errors.As(err, &ce) && ce.never
}

// pressure looks at the headroom once and reports whether a headroom is
// below its floor now, and whether one is within nearFloor times its
// floor.
func (g *guard) pressure() (pressed, near bool) {
	v := (*g.look.Load())()
	if g.checkView(v, 0) != nil {
		return true, true
	}
	if g.minAvail > 0 && v.avail >= 0 && v.avail < nearFloor*g.minAvail {
		near = true
	}
	if v.cg.limit > 0 && v.cg.room < nearFloor*g.cgroupFloor(v.cg.limit) {
		near = true
	}
	return false, near
}

// cgroupLimitError is the guard's error when growth would cross the
// cgroup's limit (or its floor under it): one sentence naming the group,
// its limit and the fix. errors.Is matches ErrLowMemory and ErrBudget.
type cgroupLimitError struct {
	need, room, floor int64
	never             bool // need is more than the limit allows at all: waiting is useless
	desc              string
}

func (e *cgroupLimitError) Error() string {
	if e.never {
		return fmt.Sprintf("pinpool: locking %d bytes at once is more than %s allows, keeping %d bytes of headroom; %s",
			e.need, e.desc, e.floor, hostmem.RaiseCgroupLimitHint)
	}
	return fmt.Sprintf("pinpool: locking %d more bytes would leave %d bytes of headroom in %s, below the %d the pool keeps (locked memory counts against the cgroup, and past its limit the kernel kills the process); %s",
		e.need, e.room-e.need, e.desc, e.floor, hostmem.RaiseCgroupLimitHint)
}

func (e *cgroupLimitError) Is(target error) bool {
	return target == ErrLowMemory || target == ErrBudget
}

// relievePressure frees idle memory of every class, sparing what Reserve
// keeps, when a headroom is below its floor, and returns when to look
// again. (What it frees is counted in Stats.TrimsBy as TrimPressure.)
func (p *Pool) relievePressure() (next time.Duration) {
	co := p.core
	if co.budget.held.Load() == 0 {
		return pressureTick // no look: nothing to free
	}
	pressed, near := co.guard.pressure()
	if !near {
		return pressureTickFar
	}
	if pressed {
		for _, c := range p.classList() {
			c.trimClass(trimPlan{want: -1, keep: int(c.reserved.Load()), reason: TrimPressure})
		}
	}
	return pressureTick
}

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
