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
// for d, and counts the pairs. The first error stops the run.
func poolRun(impl string, g int, size int64, d time.Duration, backend string, pair getRelease) (PoolRun, error) {
	var stop atomic.Bool
	var ops atomic.Int64
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
			ops.Add(n)
		})
	}
	t0 := time.Now()
	close(start)
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	el := time.Since(t0)
	if first != nil {
		return PoolRun{}, fmt.Errorf("measure: %s pool with %d goroutines: %w", impl, g, first)
	}
	r := PoolRun{Impl: impl, Goroutines: g, Size: size, Ops: ops.Load(), Elapsed: el, Backend: backend}
	if r.Ops > 0 {
		r.OpsPerSec = float64(r.Ops) / el.Seconds()
		r.NsPerOp = float64(el.Nanoseconds()) * float64(g) / float64(r.Ops)
	}
	return r, nil
}

// poolPairs returns the Get+Release pair of pinpool's pool and of the seed
// design over the same backend, each warmed with one buffer per goroutine
// of the largest count, and a function that closes both.
func poolPairs(p Plan, backend pinpool.Backend) (pin, seed getRelease, closeAll func(), err error) {
	pool, err := pinpool.New(pinpool.Options{Backend: backend})
	if err != nil {
		return nil, nil, nil, err
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
