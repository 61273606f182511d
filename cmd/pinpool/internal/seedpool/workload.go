package seedpool

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// FrameSize is one 1080p NV12 frame, 1920*1080*3/2 = 3,110,400 bytes: the
// buffer size of the seed's test.
const FrameSize = 1920 * 1080 * 3 / 2

// Defaults of the seed workload.
const (
	// DefaultGoroutines is the number of threads of the seed test.
	DefaultGoroutines = 10
	// DefaultIterations is how many frames each seed thread allocates.
	DefaultIterations = 100
	// SleepStep is the unit of the growing sleep: at SleepScale 1,
	// iteration i (from 0) sleeps (i+1)*SleepStep.
	SleepStep = 10 * time.Microsecond
)

// Workload is the seed's test as a reusable driver. Goroutines goroutines
// start together (a start barrier) and each runs Iterations iterations of:
// get a buffer of Size bytes, hold it, release it.
//
// The hold is the seed's growing sleep. In iteration i (counting from 0)
// every goroutine sleeps
//
//	time.Duration(SleepScale * float64(time.Duration(i+1)*SleepStep))
//
// between get and release: at SleepScale 1, 10 µs in the first iteration
// growing linearly to 1 ms in the hundredth, 50.5 ms in all per goroutine
// with the default 100 iterations. SleepScale 0 does not sleep at all (a
// tight loop that measures the pool under contention). The seed's exact
// sleep is not known; this formula keeps its shape (growing with the
// iteration, the same for every thread) and is the one to quote.
//
// Zero Goroutines, Iterations and Size take the seed's values; see
// SeedWorkload for the whole seed test, sleep included.
type Workload struct {
	Goroutines int     // default DefaultGoroutines (10)
	Iterations int     // per goroutine; default DefaultIterations (100)
	Size       int     // bytes per get; default FrameSize (3,110,400)
	SleepScale float64 // scale of the growing hold; 0: no sleep

	// Stop, when closed, ends the run early: no goroutine starts another
	// iteration, and one asleep in its hold wakes to release. Nil: never.
	Stop <-chan struct{}
}

// SeedWorkload returns the seed's test: 10 goroutines, 100 iterations, a
// 1080p NV12 frame, the growing sleep at scale 1.
func SeedWorkload() Workload {
	return Workload{
		Goroutines: DefaultGoroutines,
		Iterations: DefaultIterations,
		Size:       FrameSize,
		SleepScale: 1,
	}
}

// Result is what a Workload run measured.
type Result struct {
	// Ops is the number of iterations whose get and release both
	// succeeded; Failures the number of iterations where one of them
	// failed (or get returned a nil release). Ops+Failures is
	// Goroutines*Iterations.
	Ops      int
	Failures int
	// Duration is the wall time from the start barrier's release until
	// the last goroutine finished.
	Duration time.Duration
	// P50, P99 and Max are nearest-rank percentiles of the latency of the
	// successful get calls (the release and the sleep are not included).
	// Each sample includes the cost of reading the clock (tens of ns).
	P50, P99, Max time.Duration
	// Err is the first error that was recorded, or nil.
	Err error
}

// PairsPerSecond returns Ops divided by Duration: get+release pairs per
// second of wall time.
func (r Result) PairsPerSecond() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Duration.Seconds()
}

// String formats the result on one line.
func (r Result) String() string {
	return fmt.Sprintf("ops=%d failures=%d duration=%v p50=%v p99=%v max=%v pairs/s=%.0f",
		r.Ops, r.Failures, r.Duration, r.P50, r.P99, r.Max, r.PairsPerSecond())
}

// worker is one goroutine's state, written only by that goroutine.
type worker struct {
	samples  []time.Duration
	ops      int
	failures int
}

// Run runs the workload with get as the allocator under test: get returns
// a buffer's release function, or an error. The loop itself does not
// allocate (the latency samples are allocated before the start), so any
// allocation measured during Run is the callback's. A failed iteration is
// counted and the goroutine goes on with the next one. Run returns the
// result and its first error (Result.Err); it returns an error and no run
// for a nil get or a negative field.
func (w Workload) Run(get func(size int) (release func() error, err error)) (Result, error) {
	if get == nil {
		return Result{}, errors.New("seedpool: Workload.Run: nil get")
	}
	if w.Goroutines < 0 || w.Iterations < 0 || w.Size < 0 || w.SleepScale < 0 || math.IsNaN(w.SleepScale) {
		return Result{}, fmt.Errorf("seedpool: invalid workload %+v", w)
	}
	if w.Goroutines == 0 {
		w.Goroutines = DefaultGoroutines
	}
	if w.Iterations == 0 {
		w.Iterations = DefaultIterations
	}
	if w.Size == 0 {
		w.Size = FrameSize
	}

	var (
		errMu    sync.Mutex
		firstErr error
	)
	record := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}

	workers := make([]worker, w.Goroutines)
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	ready.Add(w.Goroutines)
	done.Add(w.Goroutines)
	for g := range workers {
		wk := &workers[g]
		wk.samples = make([]time.Duration, 0, w.Iterations)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			for i := range w.Iterations {
				select {
				case <-w.Stop:
					return
				default:
				}
				t0 := time.Now()
				release, err := get(w.Size)
				lat := time.Since(t0)
				if err == nil && release == nil {
					err = errors.New("get returned a nil release function")
				}
				if err != nil {
					wk.failures++
					record(&StepError{Goroutine: g, Iteration: i, Op: "get", Err: err})
					continue
				}
				wk.samples = append(wk.samples, lat)
				if w.SleepScale > 0 {
					hold := time.NewTimer(time.Duration(w.SleepScale * float64(time.Duration(i+1)*SleepStep)))
					select {
					case <-hold.C:
					case <-w.Stop:
						hold.Stop()
					}
				}
				if err := release(); err != nil {
					wk.failures++
					record(&StepError{Goroutine: g, Iteration: i, Op: "release", Err: err})
					continue
				}
				wk.ops++
			}
		}()
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	done.Wait()
	res := Result{Duration: time.Since(t0)}

	var all []time.Duration
	for i := range workers {
		res.Ops += workers[i].ops
		res.Failures += workers[i].failures
		all = append(all, workers[i].samples...)
	}
	slices.Sort(all)
	res.P50 = Percentile(all, 50)
	res.P99 = Percentile(all, 99)
	res.Max = Percentile(all, 100)
	res.Err = firstErr
	return res, firstErr
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, which must be in ascending order: the smallest sample such that
// at least p percent of the samples are less than or equal to it. It
// returns 0 for no samples, the minimum for p <= 0 (or NaN) and the maximum
// for p >= 100.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if p <= 0 || math.IsNaN(p) {
		return sorted[0]
	}
	if p >= 100 {
		return sorted[n-1]
	}
	rank := int(math.Ceil(p * float64(n) / 100))
	rank = max(rank, 1)
	return sorted[min(rank, n)-1]
}

// StepError is a failed get or release of a workload run: which goroutine,
// which iteration, and the error of the pool under test, which its message
// shows as is (a tool prints it to its users without this package's name).
type StepError struct {
	Goroutine, Iteration int
	Op                   string // "get" or "release"
	Err                  error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("goroutine %d, iteration %d: %s: %v", e.Goroutine, e.Iteration, e.Op, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }
