package measure

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cuda"
)

// smallPlan measures little, quickly, within a small RLIMIT_MEMLOCK.
func smallPlan() Plan {
	return Plan{
		Sizes:          []int64{4 << 10, 64 << 10},
		MinRepeats:     3,
		MinTime:        time.Millisecond,
		RotateBytes:    1 << 20,
		AllocSizes:     []int64{4 << 10, 256 << 10},
		AllocRepeats:   3,
		PoolGoroutines: []int{1, 2},
		PoolSize:       4 << 10,
		PoolTime:       20 * time.Millisecond,
	}
}

// TestRunHost runs a small plan. Without a GPU (CI) it checks the host
// path: no transfers and a Skipped line saying why, host allocation rows,
// pool hits, pool throughput for both implementations, and progress for
// every row. With a GPU it checks that every transfer row has figures.
func TestRunHost(t *testing.T) {
	needLockable(t, 1<<20) // allocations of 256 KiB, and both pools
	var steps []Step
	p := smallPlan()
	p.Progress = func(s Step) { steps = append(steps, s) }
	r, err := Run(context.Background(), p, "test")
	if err != nil {
		t.Fatal(err)
	}
	if r.Command != "test" || r.Date.IsZero() || r.Machine.CPUs < 1 || r.Machine.GOOS == "" {
		t.Errorf("header %+v", r)
	}
	if r.IsNoGPU() {
		if len(r.Transfers) != 0 {
			t.Errorf("%d transfer rows without a GPU", len(r.Transfers))
		}
		if len(r.Skipped) == 0 || !strings.HasPrefix(r.Skipped[0], "transfers: no GPU") {
			t.Errorf("skipped %q, want a line saying the transfers need a GPU", r.Skipped)
		}
		ops := map[string]int{}
		for _, a := range r.Allocs {
			ops[a.Op]++
			if a.Median <= 0 || a.Min > a.Median || a.Max < a.Median || a.Repeats < 1 {
				t.Errorf("allocation row %+v", a)
			}
		}
		for _, op := range []string{OpMmapLock, OpMunmap, OpPoolHit} {
			if ops[op] != 2 {
				t.Errorf("%d %s rows, want one per size (2): %+v", ops[op], op, r.Allocs)
			}
		}
	} else {
		if len(r.Transfers) == 0 {
			t.Fatalf("no transfer rows with a GPU; skipped %q", r.Skipped)
		}
		for _, tr := range r.Transfers {
			if tr.GBps <= 0 || tr.Median <= 0 || tr.Repeats < 3 {
				t.Errorf("transfer row %+v", tr)
			}
		}
	}
	impls := map[string]int{}
	for _, run := range r.Pool {
		impls[run.Impl]++
		if run.Ops <= 0 || run.OpsPerSec <= 0 || run.NsPerOp <= 0 || run.Size != 4<<10 || run.Backend == "" {
			t.Errorf("pool row %+v", run)
		}
	}
	if impls[ImplPinpool] != 2 || impls[ImplSeed] != 2 {
		t.Errorf("pool rows %+v, want 2 per implementation", r.Pool)
	}
	full, _ := p.WithDefaults()
	gpus := 1
	if r.IsNoGPU() {
		gpus = 0
	}
	want := full.steps(gpus)
	if len(steps) != want || steps[len(steps)-1].Done != want || steps[0].Total != want {
		t.Errorf("%d progress steps (last %+v), want %d", len(steps), steps[len(steps)-1], want)
	}
}

// TestRunCancelled checks that a cancelled context stops Run with its
// error.
func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := smallPlan()
	_, err := Run(ctx, p, "")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestPlanDefaults(t *testing.T) {
	for name, p := range map[string]Plan{"default": DefaultPlan(), "quick": QuickPlan()} {
		if err := p.check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if len(p.Sizes) == 0 || len(p.Kinds) != len(Kinds) || len(p.Directions) != 3 || len(p.PoolGoroutines) == 0 {
			t.Errorf("%s: %+v", name, p)
		}
	}
	d := DefaultPlan()
	if d.Sizes[0] != 4<<10 || d.Sizes[len(d.Sizes)-1] != 1<<30 || len(d.Sizes) != 10 {
		t.Errorf("default sizes %v, want 4 KiB .. 1 GiB in steps of 4", d.Sizes)
	}
	if d.arenaSize() != 1<<30 {
		t.Errorf("default arena %d", d.arenaSize())
	}
}

func TestPlanInvalid(t *testing.T) {
	for name, p := range map[string]Plan{
		"size 0":          {Sizes: []int64{0}},
		"size too big":    {Sizes: []int64{MaxTransferSize + 1}},
		"no sizes":        {Sizes: []int64{}},
		"kind":            {Kinds: []Kind{"pinned-ish"}},
		"direction":       {Directions: []Direction{"up"}},
		"repeats":         {MinRepeats: -1},
		"max below min":   {MinRepeats: 10, MaxRepeats: 5},
		"min time":        {MinTime: -time.Second},
		"rotate":          {RotateBytes: -1},
		"alloc repeats":   {AllocRepeats: -2},
		"alloc size":      {AllocSizes: []int64{-1}},
		"pool size":       {PoolSize: 2 << 30},
		"pool time":       {PoolTime: -time.Millisecond},
		"pool goroutines": {PoolGoroutines: []int{0}},
		"file size":       {FileSize: -1},
		"file too big":    {FileSize: MaxTransferSize + 1},
		"file repeats":    {FileSize: 1 << 20, FileRepeats: -1},
	} {
		if _, err := p.WithDefaults(); !errors.Is(err, ErrPlan) {
			t.Errorf("%s: got %v, want ErrPlan", name, err)
		}
		if _, err := Run(context.Background(), p, ""); !errors.Is(err, ErrPlan) {
			t.Errorf("%s: Run returned %v, want ErrPlan", name, err)
		}
	}
	// No sizes is fine when transfers are not measured.
	if _, err := (Plan{Sizes: []int64{}, NoTransfers: true}).WithDefaults(); err != nil {
		t.Errorf("no sizes with NoTransfers: %v", err)
	}
}

func TestParse(t *testing.T) {
	for _, k := range Kinds {
		if got, err := ParseKind(string(k)); err != nil || got != k {
			t.Errorf("ParseKind(%q) = %q, %v", k, got, err)
		}
	}
	if _, err := ParseKind("zero-copy"); err == nil {
		t.Error("ParseKind accepted an unknown kind")
	}
	for in, want := range map[string]Direction{"H2D": H2D, "h2d": H2D, "D2H": D2H, "d2h": D2H, "both": Both, "bidir": Both} {
		if got, err := ParseDirection(in); err != nil || got != want {
			t.Errorf("ParseDirection(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseDirection("sideways"); err == nil {
		t.Error("ParseDirection accepted an unknown direction")
	}
}

// TestNoDriverIsHostOnly checks the premise of TestRunHost's host branch:
// without a driver, openGPU reports cuda.IsNoDriver.
func TestNoDriverIsHostOnly(t *testing.T) {
	g, err := openGPU(DefaultPlan(), 0)
	if err == nil {
		g.close()
		t.Skip("a GPU is present")
	}
	if !cuda.IsNoDriver(err) {
		t.Fatalf("openGPU without a GPU: %v, want an error cuda.IsNoDriver accepts", err)
	}
}

// TestHostCopies measures the host copy rows of a small plan: one per size
// and distinct goroutine count, a goroutine count too large for a size
// measured once as the most the size allows, and every rate positive.
func TestHostCopies(t *testing.T) {
	p, err := Plan{NoTransfers: true, NoAlloc: true, NoPool: true, CopySizes: []int64{64 << 10, 1 << 20},
		CopyThreads: []int{1, 2, 4}, MinRepeats: 3, MinTime: time.Millisecond}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	var steps int
	p.Progress = func(Step) { steps++ }
	r, err := Run(context.Background(), p, "test")
	if err != nil {
		t.Fatal(err)
	}
	// 64 KiB allows one goroutine; 1 MiB allows 1, 2 and 4.
	if len(r.HostCopies) != 4 {
		t.Fatalf("%d rows, want 4: %+v", len(r.HostCopies), r.HostCopies)
	}
	for _, h := range r.HostCopies {
		if h.GBps <= 0 || h.Repeats < 3 || h.Median <= 0 || h.Size/int64(h.Threads) < minCopyPart {
			t.Errorf("row %+v", h)
		}
	}
	if steps != p.steps(0) {
		t.Errorf("%d progress steps, plan says %d", steps, p.steps(0))
	}
}

// TestTransferJSONLegacy: a report saved before the rate was named
// gigabytes_per_second still reads back with its rates.
func TestTransferJSONLegacy(t *testing.T) {
	var r Report
	if err := json.Unmarshal([]byte(`{"transfers":[{"kind":"pinned","direction":"H2D","size_bytes":4096,"gbps":1.5},
		{"kind":"pinned","direction":"D2H","size_bytes":4096,"gigabytes_per_second":2.5}]}`), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Transfers) != 2 || r.Transfers[0].GBps != 1.5 || r.Transfers[1].GBps != 2.5 || r.Transfers[0].Kind != Pinned {
		t.Fatalf("%+v", r.Transfers)
	}
	out, err := json.Marshal(r.Transfers[0])
	if err != nil || !strings.Contains(string(out), `"gigabytes_per_second":1.5`) || strings.Contains(string(out), `"gbps"`) {
		t.Fatalf("%s, %v", out, err)
	}
}

// TestBatchKind checks the batch kind's place: last in Kinds, right after
// staged, parsed by name, and in the default and quick plans.
func TestBatchKind(t *testing.T) {
	if len(Kinds) < 2 || Kinds[len(Kinds)-1] != Batch || Kinds[len(Kinds)-2] != Staged {
		t.Errorf("Kinds = %v, want batch right after staged, last", Kinds)
	}
	if k, err := ParseKind("batch"); err != nil || k != Batch {
		t.Errorf("ParseKind(batch) = %q, %v", k, err)
	}
	for name, p := range map[string]Plan{"default": DefaultPlan(), "quick": QuickPlan()} {
		if !slices.Contains(p.Kinds, Batch) {
			t.Errorf("%s plan kinds %v lack batch", name, p.Kinds)
		}
	}
}

// TestRunBatch measures the batch kind alone on the GPU: wall-timed rows
// in every direction, or, on a driver older than CUDA 12.8, one Skipped
// line saying so and no rows. Without a GPU it skips.
func TestRunBatch(t *testing.T) {
	if err := cuda.Load(); err != nil {
		t.Skipf("GPU test skipped: %v", err)
	}
	p := smallPlan()
	p.Kinds = []Kind{Batch}
	p.Sizes = []int64{4 << 10, 4<<20 + 5, 9 << 20} // one piece, two, three
	p.RotateBytes = 32 << 20
	p.NoAlloc, p.NoPool, p.NoHostCopy = true, true, true
	r, err := Run(context.Background(), p, "test")
	if err != nil {
		t.Fatal(err)
	}
	if r.IsNoGPU() {
		t.Skipf("GPU test skipped: %s", r.Machine.NoGPU)
	}
	if err := cuda.BatchCopyAvailable(); errors.Is(err, cuda.ErrMissingSymbol) {
		if len(r.Transfers) != 0 || len(r.Skipped) != 1 || !strings.HasPrefix(r.Skipped[0], "batch: skipped: ") {
			t.Errorf("old driver: %d rows, skipped %q; want one batch skipped line", len(r.Transfers), r.Skipped)
		}
		return
	}
	if len(r.Skipped) != 0 {
		t.Errorf("skipped %q", r.Skipped)
	}
	if want := len(p.Sizes) * len(Directions); len(r.Transfers) != want {
		t.Fatalf("%d rows, want %d", len(r.Transfers), want)
	}
	for _, tr := range r.Transfers {
		if tr.Kind != Batch || tr.Timer != timerWall || tr.GBps <= 0 || tr.Median <= 0 || tr.Repeats < 3 {
			t.Errorf("row %+v", tr)
		}
		t.Logf("batch %s %d bytes: %.2f GB/s", tr.Dir, tr.Size, tr.GBps)
	}
}

// TestPrepareCopy: the host copy's setup writes the pattern everywhere and
// stops at once when ctx is done (it took 7 s for 1 GiB before it looked).
func TestPrepareCopy(t *testing.T) {
	src, dst := make([]byte, 3<<20+77), make([]byte, 3<<20+77)
	for i := range dst {
		dst[i] = 1
	}
	if err := prepareCopy(context.Background(), src, dst); err != nil {
		t.Fatal(err)
	}
	for i := range src {
		if src[i] != byte(i) || dst[i] != 0 {
			t.Fatalf("byte %d: src %d dst %d", i, src[i], dst[i])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	big := make([]byte, 1<<30) // not touched: the setup must not get to it
	t0 := time.Now()
	if err := prepareCopy(ctx, big, big); !errors.Is(err, context.Canceled) {
		t.Fatalf("prepareCopy with a done ctx = %v", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("took %v with a done ctx", d)
	}
}

// TestFilesNeedAGPU checks that the file benchmark says it was skipped
// without a GPU, and measures the rows with one.
func TestFilesNeedAGPU(t *testing.T) {
	p := Plan{NoTransfers: true, NoAlloc: true, NoPool: true, NoHostCopy: true, FileSize: 8 << 20, FileDir: t.TempDir(), FileRepeats: 1}
	r, err := Run(context.Background(), p, "test")
	if err != nil {
		t.Fatal(err)
	}
	if r.IsNoGPU() {
		if !slices.Contains(r.Skipped, "files: no GPU") || len(r.Files) != 0 {
			t.Fatalf("no GPU: skipped %q, %d file rows", r.Skipped, len(r.Files))
		}
		return
	}
	if len(r.Files) != 6 {
		t.Fatalf("%d file rows, want 6: %+v", len(r.Files), r.Files)
	}
	for _, f := range r.Files {
		if f.GBps <= 0 || f.Size != 8<<20 {
			t.Fatalf("row %+v", f)
		}
	}
}
