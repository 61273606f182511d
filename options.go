package pinpool

import (
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/pinpool/pinpool/hostmem"
)

// Options configure a Pool. The zero value is ready to use: the CUDA
// backend on device 0 when a driver is found (else locked host memory), no
// budget, size classes with at most 12.5% rounding (under 0.8% above
// 1 GiB), the growth of the common C++ mutex-and-list pool (grow by 4) and
// its bound at rest (at most 32 idle buffers per size),
// reached by decay: idle memory above that bound goes back 5 seconds after
// it was last needed, and all idle memory after 30 seconds.
type Options struct {
	// Backend supplies the memory. Nil picks DefaultBackend().
	Backend Backend

	// Budget caps the bytes the pool holds: in use, idle and waiting on
	// fences together. Get blocks while a request would exceed it (after
	// trimming idle memory of other sizes), TryGet returns ErrBudget; a
	// request larger than the whole Budget fails at once. Zero means no
	// cap; otherwise at least 4096.
	Budget int64

	// MinAvailable is the memory guard's floor: the pool refuses to grow
	// (Get waits, TryGet fails with ErrLowMemory) when that would take the
	// system's MemAvailable (/proc/meminfo), or the headroom under the
	// memory limit of the cgroup the process runs in, below this many
	// bytes, and frees its idle memory when either falls below it, since
	// locked memory cannot be swapped: a host that runs out of it freezes,
	// a container that crosses its limit is killed. Zero means the
	// default, 3% of MemTotal for the system and 3% of the cgroup's limit
	// for the cgroup; a negative value turns the guard off, except that
	// growth never crosses the cgroup's limit itself.
	MinAvailable int64

	// Exact makes every distinct request size (rounded up to whole pages)
	// its own size class, with no rounding beyond the page. Use it for
	// workloads of a few fixed sizes, such as video frames. By default
	// sizes are rounded to classes that waste at most 12.5%, and
	// under 0.8% for buffers above 1 GiB.
	Exact bool

	// GrowCount is how many buffers a large size class (above SlabMax)
	// allocates at once when it runs out. Zero means 4, as the common C++
	// mutex-and-list pool; negative is invalid.
	GrowCount int

	// GrowBytes bounds one growth of a large class in bytes: it allocates
	// min(GrowCount, GrowBytes/size) buffers, and at least one. Zero means
	// 64 MiB; negative is invalid.
	GrowBytes int64

	// SlabMax is the largest buffer carved from shared slabs: buffers up to
	// this size come many to a slab, so that one backend allocation serves
	// many buffers. Zero means 1 MiB; negative disables slabs; at most
	// 512 MiB.
	SlabMax int

	// SlabSize is the size of one slab, a multiple of 4096 of at most
	// 1 GiB that holds at least two buffers of SlabMax. Zero means 4 MiB,
	// or 4*SlabMax if that is larger (at most 1 GiB). Under a Budget smaller than a slab,
	// slabs are cut to fit the budget.
	SlabSize int

	// MaxIdle is how many idle buffers per size class the pool keeps at
	// rest (the cap of the common C++ mutex-and-list pool): idle buffers
	// beyond it are freed once they have not been needed for IdleDecay,
	// never at once, so that a load that breathes does not free and regrow the same memory. Whole
	// allocations are freed, so a class may end below MaxIdle; what
	// Reserve asked to keep stays. Zero means 32; negative means no cap
	// (idle memory goes only after IdleTimeout, or on Trim).
	MaxIdle int

	// IdleDecay is how long idle memory above MaxIdle stays after it was
	// last needed: an allocation of which no buffer was handed out for
	// this long is freed while its class has more than MaxIdle idle
	// buffers. A class that regrows within its decay time after such a
	// free doubles its own decay time (up to IdleTimeout, or 16 times
	// IdleDecay when there is none): a load that comes back is a load the
	// pool should keep memory for. Zero means 5 seconds; negative means
	// never (only IdleTimeout frees); otherwise at least 1 ms.
	IdleDecay time.Duration

	// IdleTimeout frees all idle memory that was not needed for this long
	// (allocations none of whose buffers was handed out meanwhile), down
	// to what Reserve asked to keep. Zero means 30 seconds; negative
	// disables it; otherwise at least 1 ms.
	IdleTimeout time.Duration

	// CloseWait is how long after Close the pool keeps polling the fences
	// of buffers released with ReleaseAfter that are still pending (see
	// Close). Zero means one minute; negative means until they complete.
	CloseWait time.Duration

	// Debug poisons released memory (0xDB) and checks the poison when the
	// buffer is handed out again: a write through a stale slice after
	// Release panics with a clear message on the next Get of that buffer.
	// It costs a pass over the memory on every Release and Get.
	Debug bool
}

// Defaults of the zero Options.
const (
	DefaultGrowCount   = 4
	DefaultGrowBytes   = 64 << 20
	DefaultSlabMax     = 1 << 20
	DefaultSlabSize    = 4 << 20
	DefaultMaxIdle     = 32
	DefaultIdleDecay   = 5 * time.Second
	DefaultIdleTimeout = 30 * time.Second
	DefaultCloseWait   = time.Minute
	// DefaultMinAvailablePercent is the system guard's default floor, in
	// percent of MemTotal.
	DefaultMinAvailablePercent = 3
)

// pageSize is the unit of the sizes in Options (Budget, SlabSize): 4 KiB,
// the smallest page of the systems the pool runs on.
const pageSize = 4096

// systemPage is the page size of this system (4 KiB on x86-64, 4, 16 or
// 64 KiB on arm64 kernels), read by New: every buffer the pool hands out
// and every allocation it asks of its backend is a multiple of it, so that
// what the pool counts is what the kernel locks. A variable so that tests
// can pretend larger pages.
var systemPage = int64(max(os.Getpagesize(), pageSize))

func pageRound(n int64) int64 { return roundUp(n, pageSize) }

// roundUp rounds n up to a multiple of unit, a power of two.
func roundUp(n, unit int64) int64 { return (n + unit - 1) &^ (unit - 1) }

// Limits of the options.
const (
	maxSlabSize    = 1 << 30
	maxSlabMax     = maxSlabSize / 2
	minIdleTimeout = time.Millisecond
)

// validate checks every field of the options and returns them with the
// defaults filled in, and MemTotal (0 when unknown). A bad field or a
// contradiction is an error wrapping ErrInvalidOptions that names it; no
// value is silently rewritten.
func (o Options) validate() (Options, int64, error) {
	bad := func(field string, value any, want string) (Options, int64, error) {
		return Options{}, 0, fmt.Errorf("%w: %s = %v: %s", ErrInvalidOptions, field, value, want)
	}
	if o.Backend != nil {
		if v := reflect.ValueOf(o.Backend); v.Kind() == reflect.Pointer && v.IsNil() {
			return bad("Backend", fmt.Sprintf("%T(nil)", o.Backend), "want a backend, or nil for the default")
		}
	}
	if o.Budget < 0 || (o.Budget > 0 && o.Budget < pageSize) {
		return bad("Budget", o.Budget, fmt.Sprintf("want 0 (no cap) or at least %d bytes", pageSize))
	}
	if o.GrowCount < 0 {
		return bad("GrowCount", o.GrowCount, "want 0 (default 4) or more")
	}
	if o.GrowBytes < 0 {
		return bad("GrowBytes", o.GrowBytes, "want 0 (default 64 MiB) or more")
	}
	if o.SlabMax > maxSlabMax {
		return bad("SlabMax", o.SlabMax, fmt.Sprintf("want at most %d (negative: no slabs)", maxSlabMax))
	}
	if o.SlabSize < 0 || o.SlabSize > maxSlabSize || o.SlabSize%pageSize != 0 {
		return bad("SlabSize", o.SlabSize, fmt.Sprintf("want 0 (default) or a multiple of %d up to %d", pageSize, maxSlabSize))
	}
	if o.IdleTimeout > 0 && o.IdleTimeout < minIdleTimeout {
		return bad("IdleTimeout", o.IdleTimeout, fmt.Sprintf("want 0 (default %v), negative (never) or at least %v", DefaultIdleTimeout, minIdleTimeout))
	}
	if o.IdleDecay > 0 && o.IdleDecay < minIdleTimeout {
		return bad("IdleDecay", o.IdleDecay, fmt.Sprintf("want 0 (default %v), negative (never) or at least %v", DefaultIdleDecay, minIdleTimeout))
	}
	if o.SlabMax > 0 && o.SlabSize > 0 && o.SlabSize < 2*o.SlabMax {
		return bad("SlabSize", o.SlabSize, fmt.Sprintf("holds fewer than 2 buffers of SlabMax = %d", o.SlabMax))
	}
	if o.Budget > 0 && o.SlabSize > 0 && int64(o.SlabSize) > o.Budget {
		return bad("SlabSize", o.SlabSize, fmt.Sprintf("larger than Budget = %d: no slab could be allocated", o.Budget))
	}
	var memTotal int64
	if mi, err := hostmem.ReadMemInfo(); err == nil {
		memTotal = int64(mi.Total)
	}
	if o.MinAvailable > 0 && memTotal > 0 && o.MinAvailable >= memTotal {
		return bad("MinAvailable", o.MinAvailable, fmt.Sprintf("at least MemTotal (%d bytes): the pool could never grow", memTotal))
	}

	if o.GrowCount == 0 {
		o.GrowCount = DefaultGrowCount
	}
	if o.GrowBytes == 0 {
		o.GrowBytes = DefaultGrowBytes
	}
	if o.SlabMax == 0 {
		o.SlabMax = DefaultSlabMax
	}
	if o.SlabSize == 0 {
		o.SlabSize = DefaultSlabSize
		if o.SlabMax > 0 && o.SlabSize < 4*o.SlabMax {
			o.SlabSize = int(min(pageRound(4*int64(o.SlabMax)), maxSlabSize))
		}
	}
	if o.MaxIdle == 0 {
		o.MaxIdle = DefaultMaxIdle
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.IdleDecay == 0 {
		o.IdleDecay = DefaultIdleDecay
	}
	if o.CloseWait == 0 {
		o.CloseWait = DefaultCloseWait
	}
	return o, memTotal, nil
}
