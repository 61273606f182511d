package measure

import (
	"sync"
	"time"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/internal/pause"
)

// neighbour is another user of the GPU in the same process: it copies 64
// KiB from pinned memory to the device every 200 µs on its own stream and
// times each copy (enqueue to completion), until end.
type neighbour struct {
	stop chan struct{}
	done sync.WaitGroup
	mu   sync.Mutex
	lat  []time.Duration
	err  error
}

const (
	neighbourBytes = 64 << 10
	neighbourGap   = 200 * time.Microsecond
)

func startNeighbour(ctx *cuda.Context) (*neighbour, error) {
	host, err := ctx.HostAlloc(neighbourBytes, 0)
	if err != nil {
		return nil, err
	}
	dev, err := ctx.MemAlloc(neighbourBytes)
	if err != nil {
		host.Free()
		return nil, err
	}
	s, err := ctx.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		dev.Free()
		host.Free()
		return nil, err
	}
	nb := &neighbour{stop: make(chan struct{})}
	nb.done.Go(func() {
		defer host.Free()
		defer dev.Free()
		defer s.Destroy()
		// Every neighbourGap, as the C++ reference's neighbour
		// (scripts/ref/arena.cpp) does: a ticker would fire about once a
		// millisecond while the process has nothing else to run.
		next := time.Now()
		for {
			select {
			case <-nb.stop:
				return
			default:
			}
			next = next.Add(neighbourGap)
			if now := time.Now(); next.Before(now) {
				next = now // late (a stalled copy): no burst to catch up
			}
			pause.Until(next)
			t0 := time.Now()
			err := s.CopyHtoDAsync(dev.Ptr(), host.Bytes())
			if err == nil {
				err = s.Synchronize()
			}
			d := time.Since(t0)
			nb.mu.Lock()
			if err != nil {
				nb.err = err
				nb.mu.Unlock()
				return
			}
			nb.lat = append(nb.lat, d)
			nb.mu.Unlock()
		}
	})
	return nb, nil
}

// take returns the latencies so far and starts a new series.
func (nb *neighbour) take() []time.Duration {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	l := nb.lat
	nb.lat = nil
	return l
}

func (nb *neighbour) end() {
	select {
	case <-nb.stop:
	default:
		close(nb.stop)
	}
	nb.done.Wait()
}
