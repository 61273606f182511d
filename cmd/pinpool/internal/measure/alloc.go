package measure

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/hostmem"
)

// allocRepeats is the calls per size: for large sizes, which take tens of
// milliseconds each, a third of them, but at least minAllocRuns (or all
// when fewer are asked).
func (p Plan) allocRepeats(size int64) int {
	if size >= 64<<20 {
		return max(min(minAllocRuns, p.AllocRepeats), p.AllocRepeats/3)
	}
	return p.AllocRepeats
}

// minAllocRuns is the fewest calls of a large allocation size: benchstat
// wants 6 samples of a figure to give it a confidence interval.
const minAllocRuns = 6

// allocRow makes the row of op at size from its samples.
func allocRow(op string, size int64, s samples) Alloc {
	med, lo, hi := s.summary()
	return Alloc{Op: op, Size: size, Repeats: len(s), Median: med, Min: lo, Max: hi, Runs: s.runs(len(s))}
}

// timed runs f and returns how long it took.
func timed(f func() error) (time.Duration, error) {
	t0 := time.Now()
	err := f()
	return time.Since(t0), err
}

// gpuAllocs measures cuMemHostAlloc and cuMemFreeHost, and
// cuMemHostRegister and cuMemHostUnregister of touched mmap'd memory, at
// size.
func (g *gpu) allocs(size int64) ([]Alloc, error) {
	n := g.p.allocRepeats(size)
	var alloc, free, reg, unreg samples
	for range n {
		var m *cuda.HostMem
		dt, err := timed(func() (err error) { m, err = g.ctx.HostAlloc(int(size), 0); return })
		if err != nil {
			return nil, fmt.Errorf("measure: %s of %d bytes: %w", OpHostAlloc, size, err)
		}
		alloc = append(alloc, dt)
		if dt, err = timed(m.Free); err != nil {
			return nil, fmt.Errorf("measure: %s of %d bytes: %w", OpFreeHost, size, err)
		}
		free = append(free, dt)
	}
	out := []Alloc{allocRow(OpHostAlloc, size, alloc), allocRow(OpFreeHost, size, free)}
	if !g.props.HostRegisterSupported {
		return out, nil
	}
	page := int64(os.Getpagesize())
	mapped := (size + page - 1) / page * page
	for range n {
		r, err := hostmem.Map(int(mapped), hostmem.Options{}) // prefaulted: touched
		if err != nil {
			return out, fmt.Errorf("measure: mapping %d bytes to register: %w", mapped, err)
		}
		var m *cuda.HostMem
		dt, err := timed(func() (err error) { m, err = g.ctx.HostRegister(r.Bytes()[:size], 0); return })
		if err != nil {
			r.Unmap()
			return out, fmt.Errorf("measure: %s of %d bytes: %w", OpRegister, size, err)
		}
		reg = append(reg, dt)
		dt, err = timed(m.Free)
		r.Unmap()
		if err != nil {
			return out, fmt.Errorf("measure: %s of %d bytes: %w", OpUnregister, size, err)
		}
		unreg = append(unreg, dt)
	}
	return append(out, allocRow(OpRegister, size, reg), allocRow(OpUnregister, size, unreg)), nil
}

// hostAllocs measures the host backend's allocation (mmap, prefault and
// mlock: hostmem.Alloc) and its free (munmap) at size.
func hostAllocs(p Plan, size int64) ([]Alloc, error) {
	var alloc, free samples
	for range p.allocRepeats(size) {
		var r *hostmem.Region
		dt, err := timed(func() (err error) { r, err = hostmem.Alloc(int(size), hostmem.Options{}); return })
		if err != nil {
			return nil, fmt.Errorf("measure: %s of %d bytes: %w", OpMmapLock, size, err)
		}
		alloc = append(alloc, dt)
		if dt, err = timed(r.Unmap); err != nil {
			return nil, fmt.Errorf("measure: %s of %d bytes: %w", OpMunmap, size, err)
		}
		free = append(free, dt)
	}
	return []Alloc{allocRow(OpMmapLock, size, alloc), allocRow(OpMunmap, size, free)}, nil
}

// poolHits is the pool-hit row at size: after one Get+Release has made an
// idle buffer, the median over the repeats of the mean time of a batch of
// Get+Release pairs.
func poolHits(p Plan, pool *pinpool.Pool, size int64) (Alloc, error) {
	const batch = 1000
	ctx := context.Background()
	getRelease := func() error {
		b, err := pool.Get(ctx, int(size))
		if err != nil {
			return fmt.Errorf("measure: pool Get of %d bytes: %w", size, err)
		}
		return b.Release()
	}
	if err := getRelease(); err != nil {
		return Alloc{}, err
	}
	var s samples
	for range p.AllocRepeats {
		t0 := time.Now()
		for range batch {
			if err := getRelease(); err != nil {
				return Alloc{}, err
			}
		}
		s = append(s, time.Since(t0)/batch)
	}
	return allocRow(OpPoolHit, size, s), nil
}
