package measure

import (
	"errors"
	"sync"
	"time"
)

// lockstep keeps n goroutines up between rounds: a round runs work(i) on
// every goroutine i at once and returns the wall time until the last one
// finished, with their errors. Starting goroutines for every round would
// add their start-up to the time of small rounds. stop ends them.
func lockstep(n int, work func(i int) error) (round func() (time.Duration, error), stop func()) {
	var wg sync.WaitGroup
	errs := make([]error, n)
	starts := make([]chan struct{}, n)
	for i := range n {
		starts[i] = make(chan struct{})
		go func() {
			for range starts[i] {
				if err := work(i); err != nil && errs[i] == nil {
					errs[i] = err
				}
				wg.Done()
			}
		}()
	}
	round = func() (time.Duration, error) {
		wg.Add(n)
		t0 := time.Now()
		for _, c := range starts {
			c <- struct{}{}
		}
		wg.Wait()
		return time.Since(t0), errors.Join(errs...)
	}
	stop = func() {
		for _, c := range starts {
			close(c)
		}
	}
	return round, stop
}
