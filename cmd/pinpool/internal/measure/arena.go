package measure

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/hostmem"
)

// An arena measurement reserves a large amount of pinned memory one way,
// times it, and, on a GPU, times a neighbour meanwhile: another goroutine
// that copies 64 KiB from pinned memory to the device every 200 µs on its
// own stream, the user whom a driver-wide lock held by the growth makes
// wait. Then it frees the memory and times that too.

// ArenaWay is one way to make a large arena, parsed from a spec
// (ParseArenaWay):
//
// Knobs are separated by colons: register:piece=64MiB:prefault=8.
//
//	pool[+BACKEND][:blocks=SIZE]  pinpool.New with the backend (default:
//	                              the zero Options' backend; cudahost:
//	                              cudahost.New(cudahost.Options{});
//	                              register (huge pages), register+small
//	                              (normal pages), hostalloc: cudahost
//	                              with that method; host: mmap + mlock),
//	                              then
//	                              Reserve(SIZE, total/SIZE), or
//	                              Reserve(total, 1) without blocks
//	hostalloc-raw                 one cuMemHostAlloc of the total
//	register[:KNOBS]              one cudahost Register allocation of the
//	                              total with knobs piece=SIZE (bytes per
//	                              registration call), prefault=N,
//	                              regw=N (registration goroutines),
//	                              huge=0|1, group=SIZE (bytes
//	                              prefaulted, then registered, in turn),
//	                              alloc=SIZE (allocations of
//	                              that size, one after another, instead
//	                              of one), pause=DURATION|off (the
//	                              lock's pause after each call)
//	hostalloc[:alloc=SIZE][:pause=D] cudahost HostAlloc allocations of SIZE
//	host[:alloc=SIZE]             hostmem.Alloc (mmap + prefault + mlock)
type ArenaWay struct {
	Spec                 string
	Kind                 string // pool, hostalloc-raw, register, hostalloc, host
	Backend              string // for pool: "", cudahost, register, register+small, hostalloc, host
	Blocks               int64  // pool: buffer size; 0: one buffer
	Alloc                int64  // register/hostalloc/host: bytes per allocation; 0: the total
	Piece                int
	Prefault, RegWorkers int
	Huge                 bool
	Pause                time.Duration // cudahost.Options.RegisterPause (0: default, < 0: none)
	Group                int           // cudahost.Options.RegisterGroup (0: default)
}

// ParseArenaWay parses a way spec (see ArenaWay).
func ParseArenaWay(spec string) (ArenaWay, error) {
	w := ArenaWay{Spec: spec, Huge: true}
	head, knobs, _ := strings.Cut(spec, ":")
	bad := func(format string, a ...any) (ArenaWay, error) {
		return ArenaWay{}, fmt.Errorf("measure: arena way %q: %s", spec, fmt.Sprintf(format, a...))
	}
	kind, backend, _ := strings.Cut(head, "+")
	switch kind {
	case "pool":
		w.Kind, w.Backend = kind, backend
		switch backend {
		case "", "cudahost", "register", "register+small", "hostalloc", "host":
		default:
			return bad("unknown backend %q (want cudahost, register, register+small, hostalloc or host)", backend)
		}
	case "hostalloc-raw", "register", "hostalloc", "host":
		if backend != "" {
			return bad("%s takes no backend", kind)
		}
		w.Kind = kind
	default:
		return bad("unknown kind %q (want pool, hostalloc-raw, register, hostalloc or host)", kind)
	}
	if knobs == "" {
		return w, nil
	}
	for _, kv := range strings.Split(knobs, ":") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return bad("knob %q is not NAME=VALUE", kv)
		}
		size := func() (int64, error) {
			n, err := parseArenaSize(v)
			if err != nil || n <= 0 || n%4096 != 0 {
				return 0, fmt.Errorf("measure: arena way %q: %s=%s: want a positive multiple of 4 KiB", spec, k, v)
			}
			return n, nil
		}
		num := func() (int, error) {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("measure: arena way %q: %s=%s: want a positive number", spec, k, v)
			}
			return n, nil
		}
		var err error
		switch {
		case k == "blocks" && w.Kind == "pool":
			w.Blocks, err = size()
		case k == "alloc" && (w.Kind == "register" || w.Kind == "hostalloc" || w.Kind == "host"):
			w.Alloc, err = size()
		case k == "piece" && w.Kind == "register":
			var n int64
			n, err = size()
			w.Piece = int(n)
		case k == "prefault" && (w.Kind == "register" || w.Kind == "host"):
			w.Prefault, err = num()
		case k == "pause" && (w.Kind == "register" || w.Kind == "hostalloc"):
			if v == "off" {
				w.Pause = -1
				break
			}
			d, perr := time.ParseDuration(v)
			if perr != nil || d <= 0 {
				return bad("pause=%s: want a duration such as 200us, or off", v)
			}
			w.Pause = d
		case k == "group" && w.Kind == "register":
			var n int64
			n, err = size()
			w.Group = int(n)
		case k == "regw" && w.Kind == "register":
			w.RegWorkers, err = num()
		case k == "huge" && (w.Kind == "register" || w.Kind == "host"):
			if v != "0" && v != "1" {
				return bad("huge=%s: want 0 or 1", v)
			}
			w.Huge = v == "1"
		default:
			return bad("unknown knob %q for %s", k, w.Kind)
		}
		if err != nil {
			return ArenaWay{}, err
		}
	}
	return w, nil
}

// ArenaResult is one measured arena.
type ArenaResult struct {
	Way       string        `json:"way"`
	Bytes     int64         `json:"bytes"`
	Backend   string        `json:"backend,omitempty"`
	Took      time.Duration `json:"took_ns"`
	GBps      float64       `json:"gb_per_s"`
	CloseTook time.Duration `json:"close_ns"`
	Neighbour *Latencies    `json:"neighbour,omitempty"`
	// NeighbourClose is the neighbour while the arena was freed.
	NeighbourClose *Latencies `json:"neighbour_close,omitempty"`
	// HeldBytes is what a pool way's pool held once the arena was made
	// (Stats.BytesHeld: its growth may round up); 0 for the other ways.
	HeldBytes int64 `json:"held_bytes,omitempty"`
	// HugeBytes is how much of the memory made huge pages back, where the
	// way can tell (the pool's Stats.BytesHugePages, the register and host
	// ways' chunks); 0 otherwise.
	HugeBytes int64 `json:"huge_bytes"`
	// Registrations is how many driver calls pinned the register and
	// hostalloc ways' chunks (Chunk.Registrations: each cuMemHostRegister,
	// so a piece registered in calls sized to the lock's bound counts each
	// call; one cuMemHostAlloc per chunk); 0 for the other ways.
	Registrations int    `json:"registrations,omitempty"`
	Error         string `json:"error,omitempty"`
	// Start, Made and Freed are CLOCK_MONOTONIC readings (ns) at the start,
	// when the arena was made and when it was freed, to match the rounds
	// with what another process measured meanwhile.
	Start int64 `json:"start_mono_ns"`
	Made  int64 `json:"made_mono_ns"`
	Freed int64 `json:"freed_mono_ns"`
}

// Latencies summarise a neighbour's copies.
type Latencies struct {
	Count int           `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
}

func summarise(l []time.Duration) *Latencies {
	if len(l) == 0 {
		return &Latencies{}
	}
	slices.Sort(l)
	q := func(f float64) time.Duration { return l[int(f*float64(len(l)-1))] }
	return &Latencies{Count: len(l), P50: q(0.5), P99: q(0.99), Max: l[len(l)-1]}
}

// ArenaOptions configure MeasureArena.
type ArenaOptions struct {
	// Context is the GPU's for the neighbour and the raw ways; nil: no
	// GPU (the host ways only, no neighbour).
	Context *cuda.Context
	// Progress, if not nil, is called with the bytes made so far, from
	// one goroutine at a time.
	Progress func(done int64)
}

// MeasureArena makes an arena of total bytes the way w says, times it and
// its release, with the neighbour running on a GPU.
func MeasureArena(ctx context.Context, w ArenaWay, total int64, o ArenaOptions) ArenaResult {
	res := ArenaResult{Way: w.Spec, Bytes: total}
	var nb *neighbour
	if o.Context != nil {
		var err error
		if nb, err = startNeighbour(o.Context); err != nil {
			res.Error = err.Error()
			return res
		}
		defer nb.end()
	}
	runtime.GC()
	res.Start = monotonic()
	t0 := time.Now()
	free, backend, err := makeArena(ctx, w, total, o, &res)
	res.Took = time.Since(t0)
	res.Made = monotonic()
	res.Backend = backend
	if nb != nil {
		res.Neighbour = summarise(nb.take())
	}
	if err != nil {
		res.Error = err.Error()
	} else {
		res.GBps = float64(total) / res.Took.Seconds() / 1e9
	}
	if free != nil {
		t1 := time.Now()
		if ferr := free(); ferr != nil && res.Error == "" {
			res.Error = "freeing: " + ferr.Error()
		}
		res.CloseTook = time.Since(t1)
		res.Freed = monotonic()
		if nb != nil {
			res.NeighbourClose = summarise(nb.take())
		}
	}
	return res
}

// makeArena makes the arena and returns the function that frees it (also
// on a failure that left something made), and sets res's HeldBytes and
// HugeBytes where it can tell them.
func makeArena(ctx context.Context, w ArenaWay, total int64, o ArenaOptions, res *ArenaResult) (free func() error, backend string, err error) {
	huge := &res.HugeBytes
	switch w.Kind {
	case "pool":
		return poolArena(ctx, w, total, o, res)
	case "hostalloc-raw":
		if o.Context == nil {
			return nil, "", errNoGPUWay
		}
		m, err := o.Context.HostAlloc(int(total), 0)
		if err != nil {
			return nil, "cuMemHostAlloc", err
		}
		report(o, total)
		return m.Free, "cuMemHostAlloc", nil
	case "host":
		opt := hostmem.Options{HugePages: w.Huge, PrefaultWorkers: w.Prefault}
		return allocs(ctx, total, w.Alloc, o, func(n int) (func() error, error) {
			r, err := hostmem.Alloc(n, opt)
			if err != nil {
				return nil, err
			}
			if h, err := r.HugePageBytes(); err == nil {
				*huge += h
			}
			return r.Unmap, nil
		}, "host(mlock)")
	default: // register, hostalloc
		if o.Context == nil {
			return nil, "", errNoGPUWay
		}
		co := cudahost.Options{Method: cudahost.HostAlloc}
		if w.Kind == "register" {
			co = cudahost.Options{Method: cudahost.Register, SmallPages: !w.Huge, RegisterChunk: w.Piece, PrefaultWorkers: w.Prefault, RegisterWorkers: w.RegWorkers, RegisterPause: w.Pause, RegisterGroup: w.Group}
		} else {
			co.RegisterPause = w.Pause
		}
		b, err := cudahost.New(co)
		if err != nil {
			return nil, "", err
		}
		var mu sync.Mutex
		var base int64
		free, name, err := allocs(ctx, total, w.Alloc, ArenaOptions{}, func(n int) (func() error, error) {
			c, err := b.AllocContext(ctx, n, func(p int) {
				if o.Progress != nil {
					mu.Lock()
					o.Progress(base + int64(p))
					mu.Unlock()
				}
			})
			if err != nil {
				return nil, err
			}
			mu.Lock()
			base += int64(n)
			*huge += c.HugePageBytes()
			res.Registrations += c.Registrations()
			mu.Unlock()
			return c.Free, nil
		}, b.Name())
		closeB := func() error {
			var e1 error
			if free != nil {
				e1 = free()
			}
			return errors.Join(e1, b.Close())
		}
		return closeB, name, err
	}
}

var errNoGPUWay = errors.New("measure: this way needs a GPU")

func report(o ArenaOptions, n int64) {
	if o.Progress != nil {
		o.Progress(n)
	}
}

// allocs makes total bytes in allocations of per bytes (0: one), one after
// another, and returns the function that frees them all in parallel.
func allocs(ctx context.Context, total, per int64, o ArenaOptions, alloc func(int) (func() error, error), name string) (func() error, string, error) {
	if per <= 0 || per > total {
		per = total
	}
	var frees []func() error
	freeAll := func() error {
		var wg sync.WaitGroup
		errs := make([]error, len(frees))
		sem := make(chan struct{}, 8)
		for i, f := range frees {
			sem <- struct{}{}
			wg.Go(func() { defer func() { <-sem }(); errs[i] = f() })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	for done := int64(0); done < total; {
		if err := ctx.Err(); err != nil {
			return freeAll, name, err
		}
		n := min(per, total-done)
		f, err := alloc(int(n))
		if err != nil {
			return freeAll, name, err
		}
		frees = append(frees, f)
		done += n
		report(o, done)
	}
	return freeAll, name, nil
}

// poolArena reserves the arena in a pool.
func poolArena(ctx context.Context, w ArenaWay, total int64, o ArenaOptions, res *ArenaResult) (func() error, string, error) {
	opt := pinpool.Options{}
	switch w.Backend {
	case "host":
		opt.Backend = pinpool.NewHostBackend(hostmem.Options{HugePages: true})
	case "cudahost", "register", "register+small", "hostalloc":
		if o.Context == nil {
			return nil, "", errNoGPUWay
		}
		var co cudahost.Options // cudahost: the documented way, cudahost.New(cudahost.Options{})
		switch w.Backend {
		case "register", "register+small":
			co = cudahost.Options{Method: cudahost.Register, SmallPages: w.Backend == "register+small"}
		case "hostalloc":
			co = cudahost.Options{Method: cudahost.HostAlloc}
		}
		b, err := cudahost.New(co)
		if err != nil {
			return nil, "", err
		}
		opt.Backend = pinpool.CUDABackend(b)
	}
	p, err := pinpool.New(opt)
	if err != nil {
		return nil, "", err
	}
	closeAll := func() error {
		err := p.Close()
		if c, ok := opt.Backend.(interface{ Close() error }); ok {
			err = errors.Join(err, c.Close())
		}
		return err
	}
	n, count := total, 1
	if w.Blocks > 0 {
		n, count = w.Blocks, int(total/w.Blocks)
	}
	if int64(int(n)) != n {
		return closeAll, p.Backend().Name(), fmt.Errorf("measure: %d-byte buffers do not fit an int", n)
	}
	err = reservePool(ctx, p, int(n), count, o.Progress)
	if err == nil {
		report(o, total)
	}
	st := p.Stats()
	res.HeldBytes, res.HugeBytes = st.BytesHeld, st.BytesHugePages
	return closeAll, p.Backend().Name(), err
}

// parseArenaSize reads a whole number of bytes with an optional binary
// unit: 4096, 64KiB, 2MiB, 32GiB, 1TiB.
func parseArenaSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}} {
		if t, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = t, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("measure: size %q: want a whole number with an optional KiB, MiB, GiB or TiB", s)
	}
	return n * mult, nil
}

// reservePool reserves count buffers of n bytes, reporting the bytes made.
func reservePool(ctx context.Context, p *pinpool.Pool, n, count int, progress func(int64)) error {
	var report func(made, total int64)
	if progress != nil {
		report = func(made, _ int64) { progress(made) }
	}
	return p.ReserveContext(ctx, n, count, report)
}
