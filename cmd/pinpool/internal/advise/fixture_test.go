package advise

import (
	"time"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// sizes4 are the fixture's transfer sizes: 4 KiB to 1 GiB by powers of 4.
var sizes4 = []int64{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30}

// h200GBps holds the fixture's bandwidths in GB/s, per kind and direction,
// one per size of sizes4: shaped like the H200 run of 2026-11-30 (pinned
// 55.4, pageable 9.37 H2D / 17.2 D2H, staged 15.6 / 26.1, mapped 51.1 at
// 1 GiB; staged overtakes pageable between 1 and 4 MiB; batch, from its
// first run, about 8 H2D / 9.6 D2H).
var h200GBps = map[measure.Kind]map[measure.Direction][]float64{
	measure.Pageable: {
		measure.H2D: {0.5, 1.4, 3.0, 5.5, 8.0, 9.5, 9.9, 7.6, 7.5, 9.37},
		measure.D2H: {0.6, 1.8, 4.0, 7.0, 9.0, 13.0, 15.5, 17.4, 17.5, 17.2},
	},
	measure.Pinned: {
		measure.H2D: {0.52, 1.5, 4.5, 11.8, 31.7, 48.0, 52.3, 54.3, 55.3, 55.4},
		measure.D2H: {0.9, 2.6, 6.0, 14.0, 24.3, 45.0, 52.5, 54.5, 55.1, 55.2},
	},
	measure.WriteCombined: {
		measure.H2D: {0.52, 1.5, 4.5, 11.8, 31.6, 48.1, 52.3, 54.2, 55.3, 55.4},
		measure.D2H: {0.9, 2.6, 6.0, 14.0, 24.3, 45.0, 52.5, 54.5, 55.1, 55.2},
	},
	measure.Registered: {
		measure.H2D: {0.5, 1.45, 4.4, 11.5, 29.6, 47.5, 52.6, 54.2, 55.3, 55.4},
		measure.D2H: {0.9, 2.6, 6.0, 14.0, 35.5, 46.0, 52.7, 54.7, 55.1, 55.2},
	},
	measure.Mapped: {
		measure.H2D: {0.4, 1.2, 3.6, 9.0, 26.0, 40.0, 47.4, 50.4, 51.0, 51.1},
		measure.D2H: {0.5, 1.5, 3.5, 9.0, 26.3, 40.0, 49.0, 51.8, 52.3, 52.5},
	},
	measure.Staged: {
		measure.H2D: {0.05, 0.2, 1.2, 3.5, 7.0, 10.5, 14.4, 17.0, 15.0, 15.6},
		measure.D2H: {0.1, 0.4, 1.5, 4.0, 7.5, 14.0, 16.8, 31.0, 20.8, 26.1},
	},
	measure.Batch: {
		measure.H2D: {0.52, 1.5, 3.1, 5.5, 7.8, 8.9, 8.4, 8.1, 8.3, 7.4},
		measure.D2H: {0.1, 0.4, 1.4, 4.5, 7.9, 9.8, 9.8, 9.4, 9.5, 9.6},
	},
}

// row makes a transfer row of gbps GB/s, its times derived from it.
func row(k measure.Kind, d measure.Direction, size int64, gbps float64) measure.Transfer {
	t := measure.Transfer{Kind: k, Dir: d, Size: size, Repeats: 5, GBps: gbps, Timer: "cuda-events"}
	med := time.Duration(float64(t.Bytes()) / gbps)
	t.Median, t.Min, t.Max = med, med*95/100, med*110/100
	if k == measure.Pageable || k == measure.Staged {
		t.Timer = "wall"
	}
	return t
}

// alloc makes an allocation row.
func alloc(op string, size int64, median time.Duration) measure.Alloc {
	return measure.Alloc{Op: op, Size: size, Repeats: 5, Median: median, Min: median * 9 / 10, Max: median * 12 / 10}
}

// poolRun makes a pool run of opsPerSec pairs per second for one second.
func poolRun(impl string, g int, opsPerSec float64) measure.PoolRun {
	return measure.PoolRun{Impl: impl, Goroutines: g, Size: frame, Ops: int64(opsPerSec), Elapsed: time.Second,
		OpsPerSec: opsPerSec, NsPerOp: float64(g) / opsPerSec * 1e9, Backend: "register"}
}

// frame is a 1080p NV12 frame, the seed's buffer size.
const frame = 1920 * 1080 * 3 / 2

// h200Report is a synthetic report shaped like the H200 host's figures:
// every kind in every direction (both: 1.8× the slower single direction)
// at 4 KiB to 1 GiB, CUDA allocation rows, a pool hit and pool runs at 1 to
// 16 goroutines.
func h200Report() *measure.Report {
	r := &measure.Report{
		Date:    time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Command: "pinpool advise",
		Machine: measure.Machine{Hostname: "h200", GOOS: "linux", GOARCH: "amd64", CPUs: 16,
			MemTotal: 128 << 30, GPU: "NVIDIA H200", Driver: "13.0", ComputeCapability: "9.0",
			CanMapHostMemory: true, PCIe: "gen5 x16"},
	}
	for _, k := range measure.Kinds {
		for i, s := range sizes4 {
			h, d := h200GBps[k][measure.H2D][i], h200GBps[k][measure.D2H][i]
			r.Transfers = append(r.Transfers, row(k, measure.H2D, s, h), row(k, measure.D2H, s, d), row(k, measure.Both, s, 1.8*min(h, d)))
		}
	}
	ms := time.Millisecond
	us := time.Microsecond
	r.Allocs = []measure.Alloc{
		alloc(measure.OpHostAlloc, 4<<10, 910*us), alloc(measure.OpHostAlloc, frame, 1170*us),
		alloc(measure.OpHostAlloc, 64<<20, 31800*us), alloc(measure.OpHostAlloc, 1<<30, 488*ms),
		alloc(measure.OpFreeHost, 4<<10, 200*us), alloc(measure.OpFreeHost, frame, 340*us),
		alloc(measure.OpFreeHost, 64<<20, 9*ms), alloc(measure.OpFreeHost, 1<<30, 136*ms),
		alloc(measure.OpRegister, 4<<10, 50*us), alloc(measure.OpRegister, frame, 230*us),
		alloc(measure.OpRegister, 64<<20, 2700*us), alloc(measure.OpRegister, 1<<30, 42700*us),
		alloc(measure.OpUnregister, 4<<10, 30*us), alloc(measure.OpUnregister, frame, 100*us),
		alloc(measure.OpUnregister, 64<<20, 1300*us), alloc(measure.OpUnregister, 1<<30, 20*ms),
		alloc(measure.OpPoolHit, frame, 41), alloc(measure.OpPoolHit, 64<<20, 42),
	}
	pin := []float64{24e6, 46e6, 92e6, 165e6, 300e6}
	seed := []float64{9.1e6, 6.4e6, 5.2e6, 3.0e6, 1.9e6}
	for i, g := range []int{1, 2, 4, 8, 16} {
		r.Pool = append(r.Pool, poolRun(measure.ImplPinpool, g, pin[i]), poolRun(measure.ImplSeed, g, seed[i]))
	}
	return r
}

// setGBps sets the bandwidth of kind in dir at every size for which f
// returns ok.
func setGBps(r *measure.Report, k measure.Kind, d measure.Direction, f func(t measure.Transfer) (float64, bool)) {
	for i, t := range r.Transfers {
		if t.Kind == k && t.Dir == d {
			if v, ok := f(t); ok {
				r.Transfers[i] = row(k, d, t.Size, v)
			}
		}
	}
}

// gbpsOf returns the fixture's bandwidth of kind in dir at size.
func gbpsOf(r *measure.Report, k measure.Kind, d measure.Direction, size int64) float64 {
	t, _ := r.Transfer(k, d, size)
	return t.GBps
}
