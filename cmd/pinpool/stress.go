package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"
	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cmd/pinpool/internal/seedpool"
	"github.com/pinpool/pinpool/cmd/pinpool/internal/textwrap"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/hostmem"
	"github.com/pinpool/pinpool/internal/units"
	"github.com/pinpool/pinpool/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// stressCmd is `pinpool stress`: the test of the C++ article pinpool starts
// from (internal/seedpool's Workload) run on pinpool's pool, and optionally
// on a raw allocation per iteration and on a mutex-and-list pool (the
// common C++ design), side by side.
//
// Each contender runs a warm-up pass (--warmup iterations per goroutine)
// and then the measured pass; the figures are those of the measured pass,
// and "driver allocs" counts the backend (driver) allocations made during
// it, so a warm pool shows 0.
//
// Gets on pinpool's pool use TryGet, which fails at once with ErrBudget when
// the budget (--budget) or the system guard leaves no room, or, with
// --wait D, Get with a deadline of D. Any failed get or release in any pass
// makes the command exit 1 after printing the report.
type stressCmd struct {
	holds int             // frames held at most at once, to fit RLIMIT_MEMLOCK; 0: no bound (set by Run)
	ctx   context.Context // ends on an interrupt (set by Run)
	args  []string        // the command line, to tell a flag given from its default (set by Validate)

	Goroutines  int           `default:"10" help:"Goroutines, each getting and releasing a buffer in a loop."`
	Iterations  int           `default:"100" help:"Measured iterations per goroutine."`
	Size        byteSize      `default:"3110400" help:"Bytes per get; default a 1080p NV12 frame. Units: KiB, MiB, GiB (also K, M, G) or kB, MB, GB."`
	SleepScale  float64       `default:"1" help:"Scale of the growing hold between get and release ((i+1)*10µs in iteration i at 1); 0: a tight loop."`
	Warmup      int           `default:"-1" help:"Iterations per goroutine of the warm-up pass run before measuring; -1: as many as --iterations; 0: none."`
	Reserve     bool          `help:"Pre-warm pinpool's pool with one idle buffer per goroutine (Pool.Reserve) before the warm-up, as a service that knows its peak would."`
	Budget      byteSize      `default:"0" help:"Budget of pinpool's pool in bytes (0: none); the raw and mutex-and-list contenders have none."`
	Wait        time.Duration `default:"0s" help:"How long a get on pinpool's pool may wait for room in the budget (Get with a deadline); 0: TryGet, which fails at once."`
	Exact       bool          `default:"true" negatable:"" help:"Give every request size its own class, for fixed sizes such as video frames; --no-exact rounds sizes to classes."`
	CompareRaw  bool          `help:"Also run the workload with a raw allocation and free per iteration: cuMemHostAlloc+cuMemFreeHost with a GPU, mmap+mlock (hostmem.Alloc+Unmap) without."`
	CompareSeed bool          `help:"Also run the workload on a mutex-and-list pool, the common C++ design (one mutex, a list per size, grow by 4, keep 32), over the same backend."`
	MetricsAddr string        `placeholder:"HOST:PORT" help:"Serve the pool's Prometheus metrics at http://HOST:PORT/metrics while the command runs (port 0 picks one; the address is printed on stderr)."`
	JSON        bool          `short:"j" help:"Print JSON instead of a table."`
	Device      int           `default:"0" help:"CUDA device whose pinned memory the pool and the contenders use (giving it without a GPU is an error)."`
}

// Validate checks the flags; kong reports its error as a usage error.
// Values are refused in one shape (flagError), sizes in the units people
// read, and a workload that could never run (a frame larger than the
// machine's memory or than --budget) is refused before anything is
// allocated.
func (c *stressCmd) Validate(kctx *kong.Context) error {
	c.args = kctx.Args
	a := flagValues(kctx.Args)
	frame := c.frameBytes()
	if mi, err := hostmem.ReadMemInfo(); err == nil && c.Size > 0 && uint64(c.Size) > mi.Total {
		return &flagError{Flag: "size", Value: a.value("size", 0, c.Size.String()),
			Want: fmt.Sprintf("at most this machine's memory (%s)", units.Size(int64(mi.Total)))}
	}
	if c.Budget > 0 && int64(c.Budget) < frame {
		return &flagError{Flag: "budget", Value: a.value("budget", 0, c.Budget.String()),
			Want: fmt.Sprintf("0 (none) or at least one buffer of --size %s (%s once rounded to pages)",
				a.value("size", 0, c.Size.String()), units.Size(frame))}
	}
	maxSize := min(int64(pinpool.MaxSize), int64(math.MaxInt))
	for _, err := range []error{
		a.checkInt("device", c.Device, 0, maxFlagInt),
		a.checkInt("goroutines", c.Goroutines, 1, 1<<16),
		a.checkInt("iterations", c.Iterations, 1, maxFlagInt),
		a.checkInt("warmup", c.Warmup, -1, maxFlagInt),
		a.checkSizes("size", []byteSize{c.Size}, 1, maxSize),
		a.checkSizes("budget", []byteSize{c.Budget}, 0, maxSize),
		a.checkDuration("wait", c.Wait, 0, false),
	} {
		if err != nil {
			return err
		}
	}
	if c.SleepScale < 0 || math.IsNaN(c.SleepScale) || math.IsInf(c.SleepScale, 0) {
		return &flagError{Flag: "sleep-scale", Value: a.value("sleep-scale", 0, fmt.Sprint(c.SleepScale)), Want: "a finite number, 0 or more"}
	}
	return nil
}

// stressReport is what `pinpool stress` reports; it is also the --json
// schema.
type stressReport struct {
	// Partial is true when an interrupt stopped the run: Results holds
	// the contenders that measured something before it.
	Partial  bool           `json:"partial,omitempty"`
	Workload stressWorkload `json:"workload"`
	Backend  string         `json:"backend"`          // pinpool's backend
	NoGPU    string         `json:"no_gpu,omitempty"` // why there is no GPU, when there is none
	Metrics  string         `json:"metrics_url,omitempty"`
	Results  []stressResult `json:"results"`
}

type stressWorkload struct {
	Goroutines int     `json:"goroutines"`
	Iterations int     `json:"iterations"`
	Size       int64   `json:"size_bytes"`
	SleepScale float64 `json:"sleep_scale"`
	Warmup     int     `json:"warmup_iterations"`
	Budget     int64   `json:"budget_bytes"` // 0: none
	Exact      bool    `json:"exact"`
	Reserved   int     `json:"reserved_buffers"` // buffers pre-warmed with Pool.Reserve (--reserve)
	Get        string  `json:"get"`              // "TryGet" or "Get with a 100ms deadline"
}

// stressResult is one contender's measured pass.
type stressResult struct {
	Name           string  `json:"name"`   // "pinpool", "seed" or "raw"
	Memory         string  `json:"memory"` // the backend, or the raw calls
	Ops            int     `json:"ops"`
	Failures       int     `json:"failures"`
	WarmupFailures int     `json:"warmup_failures"`
	DurationNs     int64   `json:"duration_ns"`
	OpsPerSecond   float64 `json:"ops_per_second"`
	P50Ns          int64   `json:"p50_ns"`
	P99Ns          int64   `json:"p99_ns"`
	MaxNs          int64   `json:"max_ns"`
	// Hits and Misses are null for a contender that does not count them
	// (the mutex-and-list pool).
	Hits   *uint64 `json:"hits"`
	Misses *uint64 `json:"misses"`
	// BytesHeld is what the contender holds after the measured pass (idle
	// memory for a pool); PeakBytesHeld the most it held at once.
	BytesHeld     int64 `json:"bytes_held"`
	PeakBytesHeld int64 `json:"peak_bytes_held"`
	// DriverAllocs counts backend allocation calls during the measured
	// pass (failed ones included).
	DriverAllocs int64  `json:"driver_allocations"`
	FirstError   string `json:"first_error,omitempty"`
}

// Run runs the contenders one after the other and prints the report.
func (c *stressCmd) Run(g *globals) error {
	c.ctx = g.ctx
	if c.ctx == nil {
		c.ctx = context.Background()
	}
	if err := needGPU(c.args, "device"); err != nil {
		return err
	}
	noGPU, err := probeGPU()
	if err != nil {
		return err
	}
	var backend pinpool.Backend
	if noGPU != "" {
		backend = pinpool.NewHostBackend(hostmem.Options{})
		fmt.Fprintf(g.stderr, "host backend: no GPU (%s)\n", noGPU)
	} else {
		cb, err := cudahost.NewDefaultDevice(c.Device)
		if err != nil {
			return fmt.Errorf("--device %d: %w", c.Device, err)
		}
		defer cb.Close()
		backend = pinpool.CUDABackend(cb)
		fmt.Fprintf(g.stderr, "backend: %s (CUDA device %d)\n", backend.Name(), c.Device)
	}
	p, err := pinpool.New(pinpool.Options{Backend: backend, Budget: int64(c.Budget), Exact: c.Exact})
	if err != nil {
		return err
	}
	defer p.Close()
	var metricsURL string
	if c.MetricsAddr != "" { // a bad address is refused before anything else
		url, stop, err := serveMetrics(c.MetricsAddr, p)
		if err != nil {
			return err
		}
		defer stop()
		metricsURL = url
		fmt.Fprintf(g.stderr, "metrics: serving %s\n", url)
	}
	if err := c.fitLockLimit(g, p); err != nil {
		return err
	}

	rep := &stressReport{
		Workload: stressWorkload{
			Goroutines: c.Goroutines, Iterations: c.Iterations, Size: int64(c.Size), SleepScale: c.SleepScale,
			Warmup: c.Warmup, Budget: int64(c.Budget), Exact: c.Exact, Get: "TryGet",
		},
		Backend: backend.Name(),
		NoGPU:   noGPU,
		Metrics: metricsURL,
		Results: []stressResult{},
	}
	if c.Warmup < 0 {
		c.Warmup = c.Iterations
		rep.Workload.Warmup = c.Warmup
	}
	if c.Reserve {
		n := c.Goroutines
		if c.holds > 0 {
			n = c.holds // what fits under RLIMIT_MEMLOCK, as fitLockLimit said
		}
		rep.Workload.Reserved = n
		if err := p.Reserve(int(c.Size), n); err != nil {
			return fmt.Errorf("--reserve: %w", err)
		}
	}
	if c.Wait > 0 {
		rep.Workload.Get = fmt.Sprintf("Get with a %v deadline", c.Wait)
	}
	if c.holds > 0 {
		rep.Workload.Get += fmt.Sprintf(", at most %d frames held at once (RLIMIT_MEMLOCK)", c.holds)
	}

	rep.add(c.ctx, c.runPool(p))
	p.Close() // its memory goes back before the next contender runs
	if c.CompareSeed && c.ctx.Err() == nil {
		rep.add(c.ctx, c.runSeed(backend))
	}
	if c.CompareRaw && c.ctx.Err() == nil {
		r, err := c.runRaw(noGPU == "")
		if err != nil {
			return err
		}
		rep.add(c.ctx, r)
	}
	if c.ctx.Err() != nil {
		rep.Partial = true
		if len(rep.Results) == 0 {
			return nil // interrupted before any contender measured: nothing to print
		}
		g.partial = true
	}

	if c.JSON {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else if err := rep.writeText(g.stdout); err != nil {
		return err
	}
	return rep.failure()
}

// add appends a contender's result, unless an interrupt (ctx done) stopped
// it before its measured pass did anything: a row of zeros is no result.
func (r *stressReport) add(ctx context.Context, res stressResult) {
	if ctx.Err() != nil && res.Ops == 0 {
		return
	}
	r.Results = append(r.Results, res)
}

// workload returns the seed workload with the command's figures, for the
// warm-up pass or the measured pass.
func (c *stressCmd) workload(warmup bool) seedpool.Workload {
	w := seedpool.Workload{Goroutines: c.Goroutines, Iterations: c.Iterations, Size: int(c.Size), SleepScale: c.SleepScale, Stop: c.ctx.Done()}
	if warmup {
		w.Iterations = c.Warmup
	}
	return w
}

// measure runs the warm-up pass (when asked) and the measured pass with get,
// calling between after the warm-up, and fills in r's timing figures.
func (c *stressCmd) measure(r *stressResult, get func(int) (func() error, error), between func()) {
	if c.holds > 0 {
		get = holdAtMost(c.holds, get)
	}
	if c.Warmup > 0 {
		res, _ := c.workload(true).Run(get)
		r.WarmupFailures = res.Failures
		if res.Err != nil {
			r.FirstError = "warm-up: " + res.Err.Error()
		}
	}
	between()
	res, _ := c.workload(false).Run(get) // the error is res.Err
	r.Ops, r.Failures = res.Ops, res.Failures
	r.DurationNs = res.Duration.Nanoseconds()
	r.OpsPerSecond = res.PairsPerSecond()
	r.P50Ns, r.P99Ns, r.MaxNs = res.P50.Nanoseconds(), res.P99.Nanoseconds(), res.Max.Nanoseconds()
	if res.Err != nil && r.FirstError == "" {
		r.FirstError = res.Err.Error()
	}
}

// runPool runs the workload on pinpool's pool.
func (c *stressCmd) runPool(p *pinpool.Pool) stressResult {
	wait := c.Wait
	get := func(size int) (func() error, error) {
		var b pinpool.Buffer
		var err error
		if wait > 0 {
			ctx, cancel := context.WithTimeout(c.ctx, wait)
			b, err = p.Get(ctx, size)
			cancel()
		} else {
			b, err = p.TryGet(size)
		}
		if err != nil {
			return nil, err
		}
		return b.Release, nil
	}
	r := stressResult{Name: "pinpool", Memory: p.Backend().Name()}
	var before pinpool.Stats
	c.measure(&r, get, func() { before = p.Stats() })
	after := p.Stats()
	hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
	r.Hits, r.Misses = &hits, &misses
	r.BytesHeld, r.PeakBytesHeld = after.BytesHeld, after.PeakHeld
	r.DriverAllocs = int64(after.Grows-before.Grows) + int64(after.Failures-before.Failures)
	return r
}

// runSeed runs the workload on the seed pool's design over backend.
func (c *stressCmd) runSeed(backend pinpool.Backend) stressResult {
	sp := seedpool.New(seedpool.ChunkAllocator(backend.Alloc), seedpool.Options{})
	defer sp.Destroy()
	r := stressResult{Name: "seed", Memory: backend.Name()}
	var allocs int64
	c.measure(&r, sp.Get, func() { allocs = sp.Allocations() })
	r.DriverAllocs = sp.Allocations() - allocs
	r.BytesHeld, r.PeakBytesHeld = sp.HeldBytes(), sp.PeakHeldBytes()
	return r
}

// runRaw runs the workload with one raw allocation and free per iteration:
// through the driver (cuMemHostAlloc, device 0) when gpu is set, else
// locked host memory (hostmem.Alloc: mmap, prefault, mlock).
func (c *stressCmd) runRaw(gpu bool) (stressResult, error) {
	var live, peak, calls atomic.Int64
	hold := func(n int64) {
		v := live.Add(n)
		for {
			m := peak.Load()
			if v <= m || peak.CompareAndSwap(m, v) {
				return
			}
		}
	}
	r := stressResult{Name: "raw"}
	var get func(int) (func() error, error)
	if gpu {
		ctx, err := cuda.NewContext(c.Device)
		if err != nil {
			return r, err
		}
		defer ctx.Close()
		r.Memory = "cuMemHostAlloc+cuMemFreeHost"
		get = func(size int) (func() error, error) {
			calls.Add(1)
			m, err := ctx.HostAlloc(size, 0)
			if err != nil {
				return nil, err
			}
			hold(int64(size))
			return func() error { live.Add(-int64(size)); return m.Free() }, nil
		}
	} else {
		r.Memory = "mmap+mlock+munmap"
		get = func(size int) (func() error, error) {
			calls.Add(1)
			m, err := hostmem.Alloc(size, hostmem.Options{})
			if err != nil {
				return nil, err
			}
			hold(int64(size))
			return func() error { live.Add(-int64(size)); return m.Unmap() }, nil
		}
	}
	var before int64
	c.measure(&r, get, func() { before = calls.Load(); peak.Store(live.Load()) })
	r.DriverAllocs = calls.Load() - before
	hits, misses := uint64(0), uint64(r.DriverAllocs)
	r.Hits, r.Misses = &hits, &misses
	r.BytesHeld, r.PeakBytesHeld = live.Load(), peak.Load()
	return r, nil
}

// failure returns an error when any get or release failed, in any pass.
func (r *stressReport) failure() error {
	var msgs []string
	for _, res := range r.Results {
		if n := res.Failures + res.WarmupFailures; n > 0 {
			total := r.Workload.Goroutines * (r.Workload.Iterations + r.Workload.Warmup)
			msgs = append(msgs, fmt.Sprintf("the %s contender failed %d of %d gets or releases; the first: %s", res.Name, n, total, res.FirstError))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New("stress: " + strings.Join(msgs, "; "))
}

func (r *stressReport) writeText(w io.Writer) error {
	wl := r.Workload
	classes := "exact classes"
	if !wl.Exact {
		classes = "rounded classes"
	}
	budget := "no budget"
	if wl.Budget > 0 {
		budget = "budget " + units.Limit(uint64(wl.Budget))
	}
	reserved := ""
	if wl.Reserved > 0 {
		reserved = fmt.Sprintf(", %d buffers reserved", wl.Reserved)
	}
	fmt.Fprintf(w, "stress: %d goroutines × %d iterations of %s (%d bytes), sleep scale %g, warm-up %d iterations\n",
		wl.Goroutines, wl.Iterations, units.Limit(uint64(wl.Size)), wl.Size, wl.SleepScale, wl.Warmup)
	fmt.Fprintln(w, textwrap.Wrap(fmt.Sprintf("pinpool: %s, %s, %s%s", classes, budget, wl.Get, reserved), textwrap.Width, "  "))
	if r.Partial {
		fmt.Fprintln(w, "partial: interrupted; the rows below are the contenders that ran before it")
	}
	// The memory each contender uses, on a line of its own: backend names
	// are long, and as a column they pushed the table past 120 characters.
	var mem []string
	for _, res := range r.Results {
		mem = append(mem, res.Name+" on "+res.Memory)
	}
	fmt.Fprintln(w, textwrap.Wrap("memory: "+strings.Join(mem, "; "), textwrap.Width, "  "))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "contender\tops/s\tp50\tp99\tmax\thits\tmisses\theld\tpeak\tallocs\tfailures")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n",
			res.Name, res.OpsPerSecond,
			formatNs(res.P50Ns), formatNs(res.P99Ns), formatNs(res.MaxNs),
			optCount(res.Hits), optCount(res.Misses),
			units.Limit(uint64(max(0, res.BytesHeld))), units.Limit(uint64(max(0, res.PeakBytesHeld))),
			res.DriverAllocs, res.Failures+res.WarmupFailures)
	}
	return tw.Flush()
}

// optCount renders a count that a contender may not have.
func optCount(v *uint64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

// formatNs writes nanoseconds as units.Duration does ("979 µs",
// "1000 µs", "1.17 ms"), never with an exponent.
func formatNs(ns int64) string { return units.Duration(time.Duration(ns)) }

// probeGPU reports why there is no GPU ("" when device 0 exists); an error
// only for a driver that is present but fails.
func probeGPU() (noGPU string, err error) {
	n, err := cuda.DeviceCount()
	switch {
	case cuda.IsNoDriver(err):
		return cuda.NoGPUReason(err), nil
	case err != nil:
		return "", err
	case n == 0:
		return "the driver sees no CUDA device", nil
	}
	return "", nil
}

// serveMetrics serves p's metrics (package metrics, in a registry of its
// own) at http://addr/metrics until stop is called. It returns the URL with
// the port that was bound.
func serveMetrics(addr string, p *pinpool.Pool) (url string, stop func(), err error) {
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, p, metrics.WithPool("stress")); err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // http.ErrServerClosed after Shutdown
	}()
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
	return "http://" + ln.Addr().String() + "/metrics", stop, nil
}

// fitLockLimit fits the workload into RLIMIT_MEMLOCK when it bounds the
// pool (host backend, no CAP_IPC_LOCK) and the goroutines' frames do not
// fit at once: every contender then holds at most as many frames as fit,
// the others waiting their turn (pinpool's pool waits for room, as a Get
// does under a Budget), --reserve keeps that many, and one line says so.
// A limit that holds not one frame is an error: nothing could run.
func (c *stressCmd) fitLockLimit(g *globals, p *pinpool.Pool) error {
	st := p.Stats()
	limit, frame := st.LockLimit, c.frameBytes()
	if !st.LockLimited || int64(c.Goroutines)*frame <= limit {
		return nil
	}
	if limit < frame {
		return fmt.Errorf("RLIMIT_MEMLOCK (%s) holds no frame of %s (--size %s): raise it (see pinpool info) or lower --size",
			lockLimitText(limit), units.Size(frame), c.Size)
	}
	c.holds = int(limit / frame)
	wait := "others wait their turn"
	switch {
	case c.Wait == 0 && !flagsGiven(c.args)["wait"]:
		c.Wait = time.Minute
		wait = "others wait up to 1m (--wait)"
	case c.Wait == 0:
		wait = "others wait, then TryGet (--wait 0s)"
	}
	if c.Reserve {
		wait = fmt.Sprintf("--reserve keeps %d, %s", c.holds, wait)
	}
	note := fmt.Sprintf("stress: RLIMIT_MEMLOCK (%s; see pinpool info) holds %d of %d frames: %s",
		lockLimitText(limit), c.holds, c.Goroutines, wait)
	fmt.Fprintln(g.stderr, textwrap.Wrap(note, textwrap.Width, "  "))
	return nil
}

// lockLimitText writes a lock limit for people: "8 MiB", and for 0 what
// it means.
func lockLimitText(n int64) string {
	if n <= 0 {
		return "0 B: locking not allowed"
	}
	return units.Size(n)
}

// holdAtMost lets at most n results of get be held (not yet released) at
// once: a get beyond that waits for a release.
func holdAtMost(n int, get func(int) (func() error, error)) func(int) (func() error, error) {
	sem := make(chan struct{}, n)
	return func(size int) (func() error, error) {
		sem <- struct{}{}
		release, err := get(size)
		if err != nil {
			<-sem
			return nil, err
		}
		return func() error {
			defer func() { <-sem }()
			return release()
		}, nil
	}
}

// frameBytes is the memory one frame takes in the pool: --size rounded up
// to whole pages.
func (c *stressCmd) frameBytes() int64 { return (int64(c.Size) + 4095) &^ 4095 }
