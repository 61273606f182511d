package measure

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/hostmem"
	"github.com/pinpool/pinpool/internal/units"
)

// Run measures what plan asks for on device 0, or, without a CUDA driver
// or device, the host side only (allocation and pool throughput over the
// host backend), saying in Report.Skipped what it left out and why. A row
// that fails (a kind's memory cannot be had, a copy fails) becomes a
// Skipped line too; Run returns an error only for an invalid plan, a
// cancelled ctx (with the report so far), or a driver that is present but
// unusable. command is recorded in the report. A report returned with an
// error is marked Partial.
func Run(ctx context.Context, plan Plan, command string) (*Report, error) {
	r, err := run(ctx, plan, command)
	if r != nil && err != nil {
		r.Partial = true
	}
	return r, err
}

// run is Run without the Partial mark.
func run(ctx context.Context, plan Plan, command string) (*Report, error) {
	p, err := plan.WithDefaults()
	if err != nil {
		return nil, err
	}
	r := &Report{Date: time.Now().UTC(), Command: command, Machine: hostMachine(),
		Transfers: []Transfer{}, Allocs: []Alloc{}, Pool: []PoolRun{}}
	var gpus []*gpu
	defer func() {
		for _, g := range gpus {
			g.close()
		}
	}()
	for _, dev := range p.Devices {
		g, err := openGPU(p, dev)
		switch {
		case cuda.IsNoDriver(err) && len(gpus) == 0:
			r.Machine.NoGPU = cuda.NoGPUReason(err)
		case err != nil:
			return nil, fmt.Errorf("measure: opening device %d: %w", dev, err)
		default:
			gpus = append(gpus, g)
		}
		if r.Machine.NoGPU != "" {
			break
		}
	}
	var g *gpu // the first device: allocation and pool benchmarks
	if len(gpus) > 0 {
		g = gpus[0]
		r.Machine.addGPU(g.props)
		if len(gpus) > 1 {
			r.Machine.GPU = fmt.Sprintf("%d× %s", len(gpus), r.Machine.GPU)
		}
	}
	prog := &progress{f: p.Progress, total: p.steps(len(gpus))}
	if len(gpus) > 0 && !p.NoTransfers {
		for _, g := range gpus {
			if err := g.transfers(ctx, r, prog); err != nil {
				return r, err
			}
		}
		if err := allAtOnce(ctx, gpus, r, prog); err != nil {
			return r, err
		}
	} else if !p.NoTransfers {
		r.Skipped = append(r.Skipped, "transfers: no GPU")
	}
	if p.FileSize > 0 {
		if g == nil {
			r.Skipped = append(r.Skipped, "files: no GPU")
		} else if err := files(ctx, p, g, r, prog); err != nil {
			return r, err
		}
	}
	if !p.NoAlloc {
		if err := allocations(ctx, p, g, r, prog); err != nil {
			return r, err
		}
	}
	if !p.NoPool {
		if err := pools(ctx, p, g, r, prog); err != nil {
			return r, err
		}
	}
	if !p.NoHostCopy {
		if err := hostCopies(ctx, p, r, prog); err != nil {
			return r, err
		}
	}
	return r, nil
}

// progress counts finished rows and reports them.
type progress struct {
	f           func(Step)
	done, total int
}

func (pr *progress) step(format string, args ...any) {
	pr.done++
	if pr.f != nil {
		pr.f(Step{Done: pr.done, Total: pr.total, What: fmt.Sprintf(format, args...)})
	}
}

// steps is the number of rows Run reports progress for, with gpus devices
// opened.
func (p Plan) steps(gpus int) int {
	n := 0
	if gpus > 0 && !p.NoTransfers {
		n += gpus * len(p.Kinds) * len(p.Directions) * len(p.Sizes)
		if gpus > 1 {
			n += len(p.allKinds()) * len(p.allDirections()) * len(p.Sizes)
		}
	}
	if !p.NoAlloc {
		n += len(p.AllocSizes)
	}
	if !p.NoPool {
		n += 2 * len(p.PoolGoroutines)
	}
	if !p.NoHostCopy {
		n += len(p.CopySizes) * len(p.CopyThreads)
	}
	if gpus > 0 && p.FileSize > 0 {
		n += 6 // two ways: warm, cold, write
	}
	return n
}

// transfers measures every kind × direction × size row.
func (g *gpu) transfers(ctx context.Context, r *Report, prog *progress) error {
	p := g.p
	rows := len(p.Directions) * len(p.Sizes)
	if err := g.arenas(); err != nil {
		r.Skipped = append(r.Skipped, "transfers: "+err.Error())
		for range len(p.Kinds) * rows {
			prog.step("transfers skipped")
		}
		return nil
	}
	for _, k := range p.Kinds {
		m, err := g.moverFor(k)
		if err != nil {
			r.Skipped = append(r.Skipped, fmt.Sprintf("%s: %v", k, err))
			for range rows {
				prog.step("%s skipped", k)
			}
			continue
		}
		for _, d := range p.Directions {
			for _, size := range p.Sizes {
				if err := ctx.Err(); err != nil {
					m.free()
					return err
				}
				t, err := g.row(m, k, d, size)
				if err != nil {
					r.Skipped = append(r.Skipped, fmt.Sprintf("%s %s %d bytes: %v", k, d, size, err))
				} else {
					r.Transfers = append(r.Transfers, t)
				}
				prog.step("transfer %s %s %s", k, d, units.Size(size))
			}
		}
		if err := m.free(); err != nil {
			r.Skipped = append(r.Skipped, fmt.Sprintf("%s: freeing its memory: %v", k, err))
		}
	}
	return nil
}

// allocations measures the allocation rows: the driver's calls with a GPU,
// the host backend's without, and a pool hit either way.
func allocations(ctx context.Context, p Plan, g *gpu, r *Report, prog *progress) error {
	var pool *pinpool.Pool
	if g != nil {
		pool = g.pool
	} else {
		hp, err := pinpool.New(pinpool.Options{Backend: pinpool.NewHostBackend(hostmem.Options{})})
		if err != nil {
			return err
		}
		defer hp.Close()
		pool = hp
	}
	// Without a GPU the host backend locks with mlock: sizes the process
	// may not lock (RLIMIT_MEMLOCK, which the host pool read at New; 0
	// with a GPU or no limit) are skipped, said once.
	var overLimit []string
	allowance := pool.Stats().LockLimit
	defer func() {
		if len(overLimit) > 0 {
			r.Skipped = append(r.Skipped, fmt.Sprintf("allocation %s: above RLIMIT_MEMLOCK (%s); `pinpool info` says how to raise it",
				strings.Join(overLimit, ", "), units.Size(allowance)))
		}
	}()
	for _, size := range p.AllocSizes {
		if err := ctx.Err(); err != nil {
			return err
		}
		if allowance > 0 && size > allowance {
			overLimit = append(overLimit, units.Size(size))
			prog.step("allocation %s skipped (RLIMIT_MEMLOCK)", units.Size(size))
			continue
		}
		var rows []Alloc
		var err error
		if g != nil {
			rows, err = g.allocs(size)
		} else {
			rows, err = hostAllocs(p, size)
		}
		r.Allocs = append(r.Allocs, rows...)
		if err != nil {
			r.Skipped = append(r.Skipped, "allocation: "+err.Error())
		}
		if hit, err := poolHits(p, pool, size); err != nil {
			r.Skipped = append(r.Skipped, "allocation: "+err.Error())
		} else {
			r.Allocs = append(r.Allocs, hit)
		}
		// The pool-hit row's memory goes back before the next size: under
		// RLIMIT_MEMLOCK it would hold the allowance the next rows measure.
		pool.Trim()
		prog.step("allocation %s", units.Size(size))
	}
	return nil
}

// pools measures Get+Release throughput of pinpool's pool and of the seed
// design, over the default backend (device 0's pinned memory, or locked
// host memory without a GPU).
func pools(ctx context.Context, p Plan, g *gpu, r *Report, prog *progress) error {
	var backend pinpool.Backend
	if g != nil {
		backend = pinpool.CUDABackend(g.be)
	} else {
		backend = pinpool.NewHostBackend(hostmem.Options{})
	}
	pin, seed, closeAll, err := poolPairs(p, backend)
	if err != nil {
		r.Skipped = append(r.Skipped, "pool: "+err.Error())
		for range 2 * len(p.PoolGoroutines) {
			prog.step("pool skipped")
		}
		return nil
	}
	defer closeAll()
	for _, n := range p.PoolGoroutines {
		for _, c := range []struct {
			impl string
			pair getRelease
		}{{ImplPinpool, pin}, {ImplSeed, seed}} {
			if err := ctx.Err(); err != nil {
				return err
			}
			run, err := poolRun(c.impl, n, p.PoolSize, p.PoolTime, p.MinRepeats, backend.Name(), c.pair)
			if err != nil {
				r.Skipped = append(r.Skipped, "pool: "+err.Error())
			} else {
				r.Pool = append(r.Pool, run)
			}
			prog.step("pool %s %d goroutines", c.impl, n)
		}
	}
	return nil
}
