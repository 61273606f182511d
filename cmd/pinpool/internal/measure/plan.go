package measure

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"
)

// ErrPlan is wrapped by every error about an invalid Plan.
var ErrPlan = errors.New("measure: invalid plan")

// MaxTransferSize is the largest transfer size a plan may ask for (16 GiB):
// each kind's memory is allocated at that size or more.
const MaxTransferSize = 16 << 30

// Plan says what Run measures. The zero value of a field takes the default
// named beside it; DefaultPlan and QuickPlan return filled-in plans.
type Plan struct {
	// Sizes are the transfer sizes in bytes, each from 1 to
	// MaxTransferSize. Default: 4 KiB to 1 GiB in steps of 4×.
	Sizes []int64
	// Kinds of host memory to measure. Default: all (Kinds), batch too: a
	// driver without it gives a Skipped line.
	Kinds []Kind
	// Directions to measure. Default: all (Directions).
	Directions []Direction
	// MinRepeats is the fewest timed transfers per row (default 10);
	// MinTime the least total time of a row's timed transfers (default
	// 50ms): a row repeats until both are reached, or MaxRepeats (default
	// 2000) transfers. The row's figure is the median.
	MinRepeats int
	MinTime    time.Duration
	MaxRepeats int
	// Warmup is the untimed transfers before each row (default 2;
	// negative: none).
	Warmup int
	// RotateBytes is the least memory a row's transfers cycle through, so
	// that small transfers do not run from the CPU's caches or the GPU's
	// L2 (default 512 MiB, above the last-level cache of large servers). Each kind
	// allocates max(largest size, RotateBytes) of host memory while it is
	// measured (the pageable arena, shared by the pageable, registered,
	// staged and batch kinds, is held throughout, and a second one when
	// Both is measured for pageable, staged or batch), and the device twice
	// that.
	RotateBytes int64

	// AllocSizes are the sizes of the allocation benchmark (default 4 KiB,
	// 64 KiB, 1 MiB, 16 MiB, 256 MiB); AllocRepeats the calls per size
	// (default 10; sizes of 64 MiB and more use a third of it, at least 6).
	// NoAlloc skips the allocation benchmark.
	AllocSizes   []int64
	AllocRepeats int
	NoAlloc      bool

	// PoolGoroutines are the goroutine counts of the pool benchmark
	// (default 1, 2, 4, ... up to runtime.NumCPU()); PoolSize the buffer
	// size (default 64 KiB); PoolTime how long each count runs per
	// implementation (default 200ms). NoPool skips the pool benchmark.
	PoolGoroutines []int
	PoolSize       int64
	PoolTime       time.Duration
	NoPool         bool

	// NoTransfers skips the transfer benchmark.
	NoTransfers bool

	// Devices are the devices whose transfers are measured (default: device
	// 0). With more than one, the pinned and staged transfers are also
	// measured on all of them at once (Device AllDevices). The allocation
	// and pool benchmarks run on the first.
	Devices []int

	// CopySizes are the sizes of the host memory copy benchmark (default
	// 64 KiB, 1 MiB, 16 MiB, 256 MiB) and CopyThreads its goroutine
	// counts (default PoolGoroutines). NoHostCopy skips it.
	CopySizes   []int64
	CopyThreads []int
	NoHostCopy  bool

	// FileSize, when positive, adds the file benchmark: a temporary file of
	// that many bytes in FileDir (default: the system's temporary
	// directory) to the device and back, FileRepeats times each way
	// (default 3), from the page cache and from the disk. It needs a GPU
	// and FileSize bytes of device memory and of disk.
	FileSize    int64
	FileDir     string
	FileRepeats int

	// Progress, when set, is called after every measured row, from the
	// goroutine that called Run.
	Progress func(Step)
}

// Step is one finished row, for progress display: Done of Total rows, and
// what was measured ("transfer pinned H2D 64 KiB").
type Step struct {
	Done, Total int
	What        string
}

// DefaultPlan is the plan of `pinpool bench` with no flags.
func DefaultPlan() Plan {
	p, _ := Plan{}.WithDefaults()
	return p
}

// QuickPlan is a short plan for `pinpool advise`: fewer sizes, a 64 MiB
// largest transfer, fewer repeats, two pool points.
func QuickPlan() Plan {
	p, _ := Plan{
		Sizes:          []int64{4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20},
		MinRepeats:     5,
		MinTime:        20 * time.Millisecond,
		RotateBytes:    256 << 20,
		AllocSizes:     []int64{64 << 10, 4 << 20, 64 << 20},
		AllocRepeats:   5,
		PoolGoroutines: []int{1, runtime.NumCPU()},
		PoolTime:       100 * time.Millisecond,
	}.WithDefaults()
	return p
}

// WithDefaults returns the plan with its zero fields filled in, and an
// error wrapping ErrPlan when it is invalid. Run does the same.
func (p Plan) WithDefaults() (Plan, error) {
	if p.FileSize < 0 || p.FileSize > MaxTransferSize {
		return p, fmt.Errorf("%w: file size %d (want 1 .. %d bytes, or 0 for no file benchmark)", ErrPlan, p.FileSize, int64(MaxTransferSize))
	}
	if p.FileRepeats < 0 {
		return p, fmt.Errorf("%w: file repeats %d", ErrPlan, p.FileRepeats)
	}
	if p.FileRepeats == 0 {
		p.FileRepeats = 3
	}
	if p.Sizes == nil {
		for s := int64(4 << 10); s <= 1<<30; s *= 4 {
			p.Sizes = append(p.Sizes, s)
		}
	}
	if p.Kinds == nil {
		p.Kinds = slices.Clone(Kinds)
	}
	if p.Directions == nil {
		p.Directions = slices.Clone(Directions)
	}
	if p.MinRepeats == 0 {
		p.MinRepeats = 10
	}
	if p.MinTime == 0 {
		p.MinTime = 50 * time.Millisecond
	}
	if p.MaxRepeats == 0 {
		p.MaxRepeats = max(2000, p.MinRepeats)
	}
	if p.Warmup == 0 {
		p.Warmup = 2
	}
	if p.RotateBytes == 0 {
		p.RotateBytes = 512 << 20
	}
	if p.AllocSizes == nil {
		p.AllocSizes = []int64{4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20}
	}
	if p.AllocRepeats == 0 {
		p.AllocRepeats = 10
	}
	if p.PoolGoroutines == nil {
		for g := 1; ; g *= 2 {
			p.PoolGoroutines = append(p.PoolGoroutines, min(g, runtime.NumCPU()))
			if g >= runtime.NumCPU() {
				break
			}
		}
	}
	if p.PoolSize == 0 {
		p.PoolSize = 64 << 10
	}
	if p.Devices == nil {
		p.Devices = []int{0}
	}
	if p.CopySizes == nil {
		p.CopySizes = []int64{64 << 10, 1 << 20, 16 << 20, 256 << 20}
	}
	if p.CopyThreads == nil {
		p.CopyThreads = slices.Clone(p.PoolGoroutines)
	}
	if p.PoolTime == 0 {
		p.PoolTime = 200 * time.Millisecond
	}
	return p, p.check()
}

func (p Plan) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrPlan, fmt.Sprintf(format, args...))
	}
	if !p.NoTransfers && len(p.Sizes) == 0 {
		return bad("no transfer sizes")
	}
	for _, s := range p.Sizes {
		if s < 1 || s > MaxTransferSize {
			return bad("transfer size %d: want 1 .. %d bytes", s, int64(MaxTransferSize))
		}
	}
	for _, k := range p.Kinds {
		if _, err := ParseKind(string(k)); err != nil {
			return bad("%v", err)
		}
	}
	for _, d := range p.Directions {
		if _, err := ParseDirection(string(d)); err != nil {
			return bad("%v", err)
		}
	}
	switch {
	case p.MinRepeats < 1:
		return bad("MinRepeats %d: want at least 1", p.MinRepeats)
	case p.MaxRepeats < p.MinRepeats:
		return bad("MaxRepeats %d is below MinRepeats %d", p.MaxRepeats, p.MinRepeats)
	case p.MinTime < 0:
		return bad("MinTime %v: want 0 or more", p.MinTime)
	case p.RotateBytes < 0 || p.RotateBytes > MaxTransferSize:
		return bad("RotateBytes %d: want 0 .. %d", p.RotateBytes, int64(MaxTransferSize))
	case p.AllocRepeats < 1:
		return bad("AllocRepeats %d: want at least 1", p.AllocRepeats)
	case p.PoolSize < 1 || p.PoolSize > 1<<30:
		return bad("PoolSize %d: want 1 .. %d bytes", p.PoolSize, 1<<30)
	case p.PoolTime <= 0:
		return bad("PoolTime %v: want more than 0", p.PoolTime)
	}
	for _, s := range p.AllocSizes {
		if s < 1 || s > MaxTransferSize {
			return bad("allocation size %d: want 1 .. %d bytes", s, int64(MaxTransferSize))
		}
	}
	for _, g := range p.PoolGoroutines {
		if g < 1 || g > 1<<16 {
			return bad("pool goroutines %d: want 1 .. 65536", g)
		}
	}
	for i, d := range p.Devices {
		if d < 0 || slices.Contains(p.Devices[:i], d) {
			return bad("device %d: want distinct ordinals from 0", d)
		}
	}
	for _, s := range p.CopySizes {
		if s < 1 || s > 4<<30 {
			return bad("host copy size %d: want 1 .. %d bytes", s, int64(4<<30))
		}
	}
	for _, g := range p.CopyThreads {
		if g < 1 || g > 1<<16 {
			return bad("host copy threads %d: want 1 .. 65536", g)
		}
	}
	return nil
}

// arenaSize is the host memory one kind cycles through.
func (p Plan) arenaSize() int64 {
	return max(slices.Max(p.Sizes), p.RotateBytes)
}
