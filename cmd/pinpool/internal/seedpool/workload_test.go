package seedpool

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one p50", ms(7), 50, 7 * time.Millisecond},
		{"one p99", ms(7), 99, 7 * time.Millisecond},
		{"1..100 p50", ms(hundred...), 50, 50 * time.Millisecond},
		{"1..100 p99", ms(hundred...), 99, 99 * time.Millisecond},
		{"1..100 p99.5", ms(hundred...), 99.5, 100 * time.Millisecond},
		{"1..100 p1", ms(hundred...), 1, 1 * time.Millisecond},
		{"1..100 max", ms(hundred...), 100, 100 * time.Millisecond},
		{"1..100 p0", ms(hundred...), 0, 1 * time.Millisecond},
		{"odd p50", ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"even p50", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"ten p99", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"ten p90", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Millisecond},
		{"outlier p99", ms(append(slices.Repeat([]int{1}, 99), 1000)...), 99, time.Millisecond},
	} {
		if got := Percentile(tc.samples, tc.p); got != tc.want {
			t.Errorf("%s: Percentile(p%v) = %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
}

// TestWorkloadSeedOnBaseline runs the seed's test on the seed's pool and
// checks the memory it ends up holding.
//
// A miss grows the list only when it is empty, that is when every block of
// the size is out. With G goroutines at most G-1 blocks are out when one of
// them misses, so the pool grows from k*g to (k+1)*g blocks only if
// k*g <= G-1: it never holds more than ceil(G/g)*g blocks (12 frames for
// the seed's 10 threads and 4 blocks per miss). No block is freed during
// the run as long as that stays within MaxIdle, so at the end every block
// is idle, HeldBytes equals PeakHeldBytes, and the Allocator was called
// exactly once per block.
func TestWorkloadSeedOnBaseline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		w     Workload
		grow  int
		bound int // ceil(G/grow)*grow
	}{
		{"seed", SeedWorkload(), 4, 12},
		{"zero value is the seed without sleep", Workload{}, 4, 12},
		{"grow 1", Workload{SleepScale: 0.2}, 1, 10},
		{"grow 3", Workload{SleepScale: 0.2}, 3, 12},
		{"16 goroutines tight", Workload{Goroutines: 16, Iterations: 300}, 4, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fa := &FakeAllocator{}
			p := New(fa, Options{GrowCount: tc.grow})
			res, err := tc.w.Run(p.Get)
			if err != nil {
				t.Fatal(err)
			}
			g, it := tc.w.Goroutines, tc.w.Iterations
			if g == 0 {
				g = DefaultGoroutines
			}
			if it == 0 {
				it = DefaultIterations
			}
			if res.Ops != g*it || res.Failures != 0 || res.Err != nil {
				t.Fatalf("result %v, want %d ops and no failures", res, g*it)
			}
			if res.Duration <= 0 || res.P50 <= 0 || res.P50 > res.P99 || res.P99 > res.Max {
				t.Fatalf("timings out of order: %v", res)
			}
			const frame = int64(FrameSize)
			held, peak := p.HeldBytes(), p.PeakHeldBytes()
			if held != peak {
				t.Fatalf("HeldBytes %d != PeakHeldBytes %d: something was trimmed", held, peak)
			}
			if held%(int64(tc.grow)*frame) != 0 {
				t.Fatalf("HeldBytes %d is not a multiple of %d frames", held, tc.grow)
			}
			if held < int64(tc.grow)*frame || held > int64(tc.bound)*frame {
				t.Fatalf("HeldBytes = %d frames, want %d..%d", held/frame, tc.grow, tc.bound)
			}
			if got := p.Allocations(); got != held/frame {
				t.Fatalf("Allocations = %d, want %d", got, held/frame)
			}
			if p.Frees() != 0 || p.outstanding() != 0 || int64(p.idle(FrameSize)) != held/frame {
				t.Fatalf("frees %d, out %d, idle %d", p.Frees(), p.outstanding(), p.idle(FrameSize))
			}
			if fa.LiveBytes() != held {
				t.Fatalf("fake live %d != HeldBytes %d", fa.LiveBytes(), held)
			}
			t.Logf("%v; held %d frames", res, held/frame)
			if err := p.Destroy(); err != nil {
				t.Fatal(err)
			}
			if fa.LiveBytes() != 0 {
				t.Fatalf("leak: %d", fa.LiveBytes())
			}
		})
	}
}

func TestWorkloadRawAllocator(t *testing.T) {
	fa := &FakeAllocator{}
	res, err := Workload{Goroutines: 4, Iterations: 25, Size: 1 << 20}.Run(AllocatorGet(fa))
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 100 || fa.AllocCalls() != 100 || fa.FreeCalls() != 100 || fa.LiveBytes() != 0 {
		t.Fatalf("ops %d, calls %d/%d, live %d", res.Ops, fa.AllocCalls(), fa.FreeCalls(), fa.LiveBytes())
	}
}

func TestWorkloadLatency(t *testing.T) {
	fa := &FakeAllocator{Latency: time.Millisecond}
	res, err := Workload{Goroutines: 2, Iterations: 5, Size: 64}.Run(AllocatorGet(fa))
	if err != nil {
		t.Fatal(err)
	}
	if res.P50 < time.Millisecond || res.Duration < 5*time.Millisecond {
		t.Fatalf("latency not measured: %v", res)
	}
}

func TestWorkloadFailures(t *testing.T) {
	errGet := errors.New("get failed")
	errRelease := errors.New("release failed")
	var calls atomic.Int64
	// Every 5th get fails; every 7th release fails.
	var releases atomic.Int64
	get := func(size int) (func() error, error) {
		if calls.Add(1)%5 == 0 {
			return nil, errGet
		}
		return func() error {
			if releases.Add(1)%7 == 0 {
				return errRelease
			}
			return nil
		}, nil
	}
	res, err := Workload{Goroutines: 4, Iterations: 50, Size: 10}.Run(get)
	if err == nil || res.Err != err {
		t.Fatalf("Run error %v, Result.Err %v", err, res.Err)
	}
	if !errors.Is(err, errGet) && !errors.Is(err, errRelease) {
		t.Fatalf("first error %v does not wrap the callback's", err)
	}
	const total = 200
	getFails := total / 5
	releaseFails := (total - getFails) / 7
	if res.Failures != getFails+releaseFails || res.Ops != total-res.Failures {
		t.Fatalf("ops %d failures %d, want %d failures", res.Ops, res.Failures, getFails+releaseFails)
	}

	// get failing always: no samples, every iteration a failure.
	res, err = Workload{Goroutines: 3, Iterations: 4}.Run(func(int) (func() error, error) { return nil, errGet })
	if !errors.Is(err, errGet) || res.Ops != 0 || res.Failures != 12 || res.P50 != 0 || res.Max != 0 {
		t.Fatalf("always failing: %v, %v", res, err)
	}

	// A nil release with no error is a failure, not a crash.
	res, err = Workload{Goroutines: 1, Iterations: 2}.Run(func(int) (func() error, error) { return nil, nil })
	if err == nil || res.Failures != 2 {
		t.Fatalf("nil release: %v, %v", res, err)
	}

	// Pool errors come through: every Allocator call fails, no retry.
	fa := &FakeAllocator{FailEvery: 1}
	p := New(fa, Options{})
	res, err = Workload{Goroutines: 2, Iterations: 3}.Run(p.Get)
	if !errors.Is(err, ErrInjected) || res.Failures != 6 || fa.AllocCalls() != 6 {
		t.Fatalf("failing allocator: %v, %v, %d calls", res, err, fa.AllocCalls())
	}
}

func TestWorkloadInvalid(t *testing.T) {
	ok := func(int) (func() error, error) { return func() error { return nil }, nil }
	for _, w := range []Workload{
		{Goroutines: -1},
		{Iterations: -1},
		{Size: -1},
		{SleepScale: -1},
	} {
		if _, err := w.Run(ok); err == nil {
			t.Errorf("%+v: no error", w)
		}
	}
	if _, err := (Workload{}).Run(nil); err == nil {
		t.Error("nil get: no error")
	}
}

func TestWorkloadSizePassed(t *testing.T) {
	var bad atomic.Int64
	get := func(size int) (func() error, error) {
		if size != FrameSize {
			bad.Add(1)
		}
		return func() error { return nil }, nil
	}
	if _, err := (Workload{Goroutines: 2, Iterations: 3}).Run(get); err != nil {
		t.Fatal(err)
	}
	if bad.Load() != 0 {
		t.Fatal("default size is not FrameSize")
	}
}
