package measure

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cmd/pinpool/internal/seedpool"
)

// getRelease is one Get+Release pair of a pool implementation.
type getRelease func() error

// poolRun runs g goroutines, each doing Get+Release pairs in a tight loop,
// for d in all, split into slices consecutive timed runs (Runs: a sample
// each for the Go benchmark format), and counts the pairs. The first
// error stops the run.
func poolRun(impl string, g int, size int64, d time.Duration, slices int, backend string, pair getRelease) (PoolRun, error) {
	slices = max(slices, 1)
	r := PoolRun{Impl: impl, Goroutines: g, Size: size, Backend: backend}
	for i := range slices {
		part := d / time.Duration(slices)
		if i < int(d%time.Duration(slices)) {
			part++
		}
		ops, el, err := poolSlice(g, part, pair)
		if err != nil {
			return PoolRun{}, fmt.Errorf("measure: %s pool with %d goroutines: %w", impl, g, err)
		}
		r.Ops += ops
		r.Elapsed += el
		r.Runs = append(r.Runs, PoolSlice{Ops: ops, Elapsed: el})
	}
	if r.Ops > 0 {
		r.OpsPerSec = float64(r.Ops) / r.Elapsed.Seconds()
		r.NsPerOp = float64(r.Elapsed.Nanoseconds()) * float64(g) / float64(r.Ops)
	}
	return r, nil
}

// poolSlice runs g goroutines doing pairs for d and returns the pairs
// done and the wall time; each goroutine counts its own pairs (a shared
// counter would measure its cache line, not the pool).
func poolSlice(g int, d time.Duration, pair getRelease) (ops int64, elapsed time.Duration, err error) {
	var stop atomic.Bool
	var total atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range g {
		wg.Go(func() {
			<-start
			n := int64(0)
			for !stop.Load() {
				if err := pair(); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					stop.Store(true)
					break
				}
				n++
			}
			total.Add(n)
		})
	}
	t0 := time.Now()
	close(start)
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return total.Load(), time.Since(t0), first
}

// poolPairs returns the Get+Release pair of pinpool's pool and of the seed
// design over the same backend, each warmed with one buffer per goroutine
// of the largest count, and a function that closes both.
func poolPairs(p Plan, backend pinpool.Backend) (pin, seed getRelease, closeAll func(), err error) {
	pool, err := pinpool.New(pinpool.Options{Backend: backend})
	if err != nil {
		return nil, nil, nil, err
	}
	if st := pool.Stats(); st.LockLimited && st.LockLimit/2 >= 4096 {
		// Both pools lock from one RLIMIT_MEMLOCK allowance: pinpool's,
		// which would cut its allocations to the whole of it, gets half,
		// so that the seed pool can warm too. (Below two pages the pool
		// as it is refuses the warm-up, saying why.)
		pool.Close()
		if pool, err = pinpool.New(pinpool.Options{Backend: backend, Budget: st.LockLimit / 2}); err != nil {
			return nil, nil, nil, err
		}
	}
	sp := seedpool.New(seedpool.ChunkAllocator(backend.Alloc), seedpool.Options{})
	closeAll = func() {
		sp.Destroy()
		pool.Close()
	}
	size := int(p.PoolSize)
	ctx := context.Background()
	pin = func() error {
		b, err := pool.Get(ctx, size)
		if err != nil {
			return err
		}
		return b.Release()
	}
	seed = func() error {
		release, err := sp.Get(size)
		if err != nil {
			return err
		}
		return release()
	}
	// Warm both: as many buffers as the most goroutines will hold at once.
	most := 1
	for _, g := range p.PoolGoroutines {
		most = max(most, g)
	}
	if err := pool.Reserve(size, most); err != nil {
		closeAll()
		return nil, nil, nil, fmt.Errorf("measure: warming pinpool's pool: %w", err)
	}
	var releases []func() error
	for range most {
		r, err := sp.Get(size)
		if err != nil {
			closeAll()
			return nil, nil, nil, fmt.Errorf("measure: warming the seed pool: %w", err)
		}
		releases = append(releases, r)
	}
	for _, r := range releases {
		r()
	}
	return pin, seed, closeAll, nil
}
