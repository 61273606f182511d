package report

import (
	"math"
	"slices"
	"time"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// Sizes of the fixture's transfers and allocations.
const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

var fixtureSizes = []int64{4 * kib, 64 * kib, mib, 16 * mib, 256 * mib, gib}

// link is a plausible transfer path: a fixed latency, then bytes at a
// peak rate (of the bytes of both transfers, for measure.Both).
type link struct {
	latency time.Duration
	peak    float64 // GB/s
}

// h200Links are H200 (PCIe gen5 x16) numbers: pinned memory near 55 GB/s
// each way and 100 both ways, pageable 9–17, the staging engine about 25,
// the driver's batch copy of pageable memory 8.5–9.6.
var h200Links = map[measure.Kind]map[measure.Direction]link{
	measure.Pageable: {
		measure.H2D:  {12 * time.Microsecond, 17},
		measure.D2H:  {14 * time.Microsecond, 9.5},
		measure.Both: {20 * time.Microsecond, 19},
	},
	measure.Pinned: {
		measure.H2D:  {7500 * time.Nanosecond, 55.5},
		measure.D2H:  {7800 * time.Nanosecond, 55.2},
		measure.Both: {9 * time.Microsecond, 101},
	},
	measure.WriteCombined: {
		measure.H2D:  {7600 * time.Nanosecond, 55.6},
		measure.D2H:  {7900 * time.Nanosecond, 54.8},
		measure.Both: {9 * time.Microsecond, 100},
	},
	measure.Registered: {
		measure.H2D:  {7600 * time.Nanosecond, 55.3},
		measure.D2H:  {7900 * time.Nanosecond, 55.0},
		measure.Both: {9200 * time.Nanosecond, 99.5},
	},
	measure.Mapped: {
		measure.H2D:  {5 * time.Microsecond, 48},
		measure.D2H:  {5 * time.Microsecond, 51},
		measure.Both: {6 * time.Microsecond, 88},
	},
	measure.Staged: {
		measure.H2D:  {20 * time.Microsecond, 25.5},
		measure.D2H:  {22 * time.Microsecond, 23},
		measure.Both: {30 * time.Microsecond, 41},
	},
	measure.Batch: {
		measure.H2D:  {8 * time.Microsecond, 8.5},
		measure.D2H:  {40 * time.Microsecond, 9.6},
		measure.Both: {54 * time.Microsecond, 9.5},
	},
}

// repeatsAt is how many times the fixture "timed" a transfer of n bytes.
func repeatsAt(n int64) int {
	switch {
	case n <= 4*kib:
		return 1000
	case n <= 64*kib:
		return 500
	case n <= mib:
		return 100
	case n <= 16*mib:
		return 20
	case n <= 256*mib:
		return 10
	}
	return 5
}

// transferRow returns the fixture's row for kind, direction and size:
// the median from the link model, GB/s from the median, as measure does.
func transferRow(k measure.Kind, d measure.Direction, n int64) measure.Transfer {
	l := h200Links[k][d]
	t := measure.Transfer{Kind: k, Dir: d, Size: n, Repeats: repeatsAt(n), Timer: "cuda-events"}
	if k == measure.Pageable || k == measure.Staged || k == measure.Batch {
		t.Timer = "wall"
	}
	bytes := float64(t.Bytes())
	t.Median = l.latency + time.Duration(math.Round(bytes/l.peak))
	t.Min = t.Median * 97 / 100
	t.Max = t.Median * 120 / 100
	t.GBps = bytes / float64(t.Median)
	return t
}

// allocRow returns an allocation measurement costing base plus perMiB for
// each MiB.
func allocRow(op string, n int64, base, perMiB time.Duration) measure.Alloc {
	med := base + time.Duration(float64(perMiB)*float64(n)/float64(mib))
	reps := 50
	if n >= 256*mib {
		reps = 3
	}
	return measure.Alloc{Op: op, Size: n, Repeats: reps, Median: med, Min: med * 95 / 100, Max: med * 130 / 100}
}

// poolRun returns a one-second pool run at nsPerOp per Get+Release pair
// on each goroutine.
func poolRun(impl string, goroutines int, size int64, nsPerOp float64, backend string) measure.PoolRun {
	elapsed := time.Second
	ops := int64(math.Round(float64(elapsed) * float64(goroutines) / nsPerOp))
	return measure.PoolRun{
		Impl: impl, Goroutines: goroutines, Size: size, Ops: ops, Elapsed: elapsed,
		OpsPerSec: float64(ops) / elapsed.Seconds(),
		NsPerOp:   float64(elapsed) * float64(goroutines) / float64(ops),
		Backend:   backend,
	}
}

// h200Report is a full report as `pinpool bench` would make it on an
// H200: every kind, direction and size, the allocation costs, the pool
// against the seed design, and one skipped line.
func h200Report() *measure.Report {
	r := &measure.Report{
		Date:    time.Date(2026, 5, 4, 9, 30, 0, 0, time.UTC),
		Command: "pinpool bench --all --out results/h200",
		Machine: measure.Machine{
			Hostname: "h200-node-07", GOOS: "linux", GOARCH: "amd64", CPUs: 16,
			CPUModel: "Intel(R) Xeon(R) Platinum 8480+", MemTotal: 128 * gib,
			GPU: "NVIDIA H200", Driver: "13.0", DriverRelease: "580.159.04", ComputeCapability: "9.0",
			CanMapHostMemory: true, PCIe: "gen5 x16",
		},
		Skipped: []string{"pool: 64 goroutines: more than 2×GOMAXPROCS (16)"},
	}
	for _, d := range measure.Directions {
		for _, k := range measure.Kinds {
			for _, n := range fixtureSizes {
				r.Transfers = append(r.Transfers, transferRow(k, d, n))
			}
		}
	}
	for _, n := range fixtureSizes {
		r.Allocs = append(r.Allocs, allocRow(measure.OpHostAlloc, n, 4*time.Microsecond, 170*time.Microsecond))
	}
	for _, n := range fixtureSizes {
		r.Allocs = append(r.Allocs, allocRow(measure.OpFreeHost, n, 3*time.Microsecond, 60*time.Microsecond))
	}
	for _, n := range fixtureSizes {
		r.Allocs = append(r.Allocs, allocRow(measure.OpRegister, n, 6*time.Microsecond, 140*time.Microsecond))
	}
	for _, n := range fixtureSizes {
		r.Allocs = append(r.Allocs, allocRow(measure.OpUnregister, n, 4*time.Microsecond, 50*time.Microsecond))
	}
	for _, n := range []int64{4 * kib, mib, gib} {
		r.Allocs = append(r.Allocs, allocRow(measure.OpPoolHit, n, 42*time.Nanosecond, 0))
	}
	pin := map[int]float64{1: 38, 2: 40, 4: 42, 8: 45, 16: 50, 32: 95}
	seed := map[int]float64{1: 65, 2: 180, 4: 420, 8: 900, 16: 1900, 32: 3900}
	for _, g := range []int{1, 2, 4, 8, 16, 32} {
		r.Pool = append(r.Pool,
			poolRun(measure.ImplPinpool, g, mib, pin[g], "cuMemHostAlloc"),
			poolRun(measure.ImplSeed, g, mib, seed[g], "cuMemHostAlloc"))
	}
	return r
}

// noGPUReport is a report from a machine without a CUDA driver: only the
// host backend's allocation costs and the pool.
func noGPUReport() *measure.Report {
	r := &measure.Report{
		Date:    time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC),
		Command: "pinpool bench",
		Machine: measure.Machine{
			Hostname: "ci-runner", GOOS: "linux", GOARCH: "arm64", CPUs: 2,
			MemTotal: 24 * gib,
			NoGPU:    "no CUDA driver (libcuda.so.1: cannot open shared object file)",
		},
	}
	for _, n := range []int64{4 * kib, mib, gib} {
		r.Allocs = append(r.Allocs,
			allocRow(measure.OpMmapLock, n, 2*time.Microsecond, 90*time.Microsecond),
			allocRow(measure.OpMunmap, n, 1500*time.Nanosecond, 30*time.Microsecond))
	}
	r.Pool = []measure.PoolRun{
		poolRun(measure.ImplPinpool, 1, mib, 36, "host"),
		poolRun(measure.ImplSeed, 1, mib, 60, "host"),
		poolRun(measure.ImplPinpool, 2, mib, 39, "host"),
		poolRun(measure.ImplSeed, 2, mib, 170, "host"),
	}
	for _, n := range []int64{64 * kib, mib, 16 * mib} {
		for _, th := range []int{1, 2} {
			gbps := 8 * float64(th) * float64(n) / float64(n+64*kib)
			med := time.Duration(float64(n) / gbps)
			r.HostCopies = append(r.HostCopies, measure.HostCopy{Size: n, Threads: th, Repeats: 10, Median: med, Min: med, Max: med, GBps: gbps})
		}
	}
	return r
}

// without returns a copy of r without the transfer rows for which drop
// says so.
func without(r *measure.Report, drop func(measure.Transfer) bool) *measure.Report {
	c := *r
	c.Transfers = slices.DeleteFunc(slices.Clone(r.Transfers), drop)
	return &c
}
