package advise

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// want checks the nth line of a topic.
type want struct {
	topic    string
	nth      int // 0: the first line of the topic
	measured bool
	advice   []string // substrings of Advice
	evidence []string // substrings of Evidence
	not      []string // substrings of neither
}

// linesOf returns the advice lines of topic, in order.
func linesOf(adv []Advice, topic string) []Advice {
	var out []Advice
	for _, a := range adv {
		if a.Topic == topic {
			out = append(out, a)
		}
	}
	return out
}

// topics returns the topic of each line.
func topics(adv []Advice) []string {
	out := make([]string, len(adv))
	for i, a := range adv {
		out[i] = a.Topic
	}
	return out
}

// check applies ws to adv.
func check(t *testing.T, adv []Advice, ws []want) {
	t.Helper()
	for _, w := range ws {
		ls := linesOf(adv, w.topic)
		if w.nth >= len(ls) {
			t.Errorf("%s #%d: missing (topics %v)", w.topic, w.nth, topics(adv))
			continue
		}
		a := ls[w.nth]
		if a.Measured != w.measured {
			t.Errorf("%s #%d: Measured = %v, want %v\n  %s\n  %s", w.topic, w.nth, a.Measured, w.measured, a.Advice, a.Evidence)
		}
		for _, s := range w.advice {
			if !strings.Contains(a.Advice, s) {
				t.Errorf("%s #%d: advice lacks %q:\n  %s", w.topic, w.nth, s, a.Advice)
			}
		}
		for _, s := range w.evidence {
			if !strings.Contains(a.Evidence, s) {
				t.Errorf("%s #%d: evidence lacks %q:\n  %s", w.topic, w.nth, s, a.Evidence)
			}
		}
		for _, s := range w.not {
			if strings.Contains(a.Advice, s) || strings.Contains(a.Evidence, s) {
				t.Errorf("%s #%d: has %q:\n  %s\n  %s", w.topic, w.nth, s, a.Advice, a.Evidence)
			}
		}
	}
}

// gpuTopics is the order of the lines of a report with a GPU.
var gpuTopics = []string{TopicPinned, TopicPinned, TopicWriteCombined, TopicMapped, TopicStaged, TopicStaged,
	TopicRegistered, TopicDirectBelow, TopicAllocation, TopicAllocation, TopicPool, TopicOptions}

func TestAdvise(t *testing.T) {
	tests := []struct {
		name   string
		report func() *measure.Report
		topics []string // nil: gpuTopics
		want   []want
	}{
		{
			name:   "h200",
			report: h200Report,
			want: []want{
				{topic: TopicPinned, measured: true,
					advice:   []string{"H2D copies of 64 KiB and more", "pays from 64 KiB"},
					evidence: []string{"pinned 55.4 GB/s vs pageable 9.37 GB/s at 1 GiB H2D (5.9×)", "16 KiB 1.07×", "64 KiB 1.50×"}},
				{topic: TopicPinned, nth: 1, measured: true,
					advice:   []string{"D2H copies of every size", "4 KiB to 1 GiB"},
					evidence: []string{"pinned 55.2 GB/s vs pageable 17.2 GB/s at 1 GiB D2H (3.2×)", "4 KiB 1.50×"}},
				{topic: TopicWriteCombined, measured: true,
					advice:   []string{"Do not use write-combined", "reads it very slowly"},
					evidence: []string{"median over 6 sizes (1 MiB to 1 GiB): 1.00×", "write-combined 55.4 GB/s vs pinned 55.4 GB/s"}},
				{topic: TopicMapped, measured: true,
					advice:   []string{"from pinned memory rather than reading it mapped", "every size"},
					evidence: []string{"51.1 GB/s vs 55.4 GB/s (0.92×)", "4 KiB 0.77×"}},
				{topic: TopicStaged, measured: true,
					advice:   []string{"H2D", "transfer.Copier", "1.66×"},
					evidence: []string{"staged 15.6 GB/s vs pageable 9.37 GB/s at 1 GiB H2D", "pinned 55.4 GB/s (staged reaches 28% of it)"}},
				{topic: TopicStaged, nth: 1, measured: true,
					advice:   []string{"D2H", "transfer.Copier", "1.52×"},
					evidence: []string{"staged 26.1 GB/s vs pageable 17.2 GB/s at 1 GiB D2H", "47%"}},
				{topic: TopicRegistered, measured: true,
					advice:   []string{"transfer.Copier.Register", "3.6×"},
					evidence: []string{"registered 55.4 GB/s vs staged 15.6 GB/s at 1 GiB H2D (3.6×)", "registered 55.2 GB/s vs staged 26.1 GB/s at 1 GiB D2H (2.1×)"}},
				{topic: TopicDirectBelow, measured: true,
					advice:   []string{"transfer.Options{DirectBelow: 2 << 20} (2 MiB)"},
					evidence: []string{"H2D: staged/pageable crosses 1 at about 2.12 MiB (1 MiB 0.88×, 4 MiB 1.11×)", "D2H", "log scale"}},
				{topic: TopicAllocation, measured: true,
					advice:   []string{"pinpool.Pool", "41 ns against 1.17 ms for cuMemHostAlloc (28537×)"},
					evidence: []string{"at 2.97 MiB", "cuMemHostAlloc 488 ms", "cuMemFreeHost 136 ms"}},
				{topic: TopicAllocation, nth: 1, measured: true,
					advice:   []string{"cudahost.Options{Method: cudahost.Register}", "64 ms per GiB against 624 ms", "9.8×"},
					evidence: []string{"cuMemHostRegister 43.2 ms", "cuMemHostUnregister 20.8 ms", "prefaults"}},
				{topic: TopicPool, measured: true,
					advice:   []string{"158×", "16 goroutines"},
					evidence: []string{"pinpool 300 M/s", "seed 1.9 M/s", "1 goroutine: pinpool 24 M/s (41.7 ns/pair) vs seed 9.1 M/s (110 ns/pair) (2.6×)"}},
				{topic: TopicOptions, measured: true,
					advice: []string{"cudahost.Options{Method: cudahost.Register, HugePages: true}", "transfer.Options{DirectBelow: 2 << 20}"},
					not:    []string{"WriteCombined", "Mapped"}},
			},
		},
		{
			name: "integrated",
			report: func() *measure.Report {
				r := &measure.Report{Machine: measure.Machine{GPU: "Orin", ComputeCapability: "8.7", Integrated: true, CanMapHostMemory: true},
					Skipped: []string{"cuMemHostRegister: not supported on this device", "write-combined: not measured on integrated GPUs"}}
				for i, s := range []int64{1 << 20, 16 << 20, 256 << 20} {
					r.Transfers = append(r.Transfers,
						row(measure.Pageable, measure.H2D, s, []float64{5, 8, 9}[i]),
						row(measure.Pinned, measure.H2D, s, []float64{12, 18, 19.5}[i]),
						row(measure.Mapped, measure.H2D, s, []float64{15, 20, 20.5}[i]))
				}
				r.Allocs = []measure.Alloc{alloc(measure.OpHostAlloc, 64<<20, 20*time.Millisecond), alloc(measure.OpPoolHit, 64<<20, 60)}
				return r
			},
			want: []want{
				{topic: TopicMapped, measured: true,
					advice:   []string{"Use mapped memory", "integrated GPU", "no copy at all"},
					evidence: []string{"20.5 GB/s at 256 MiB", "pinned copy moves 19.5 GB/s"}},
				{topic: TopicPinned, measured: true, advice: []string{"every size"}, evidence: []string{"2.2×"}},
				{topic: TopicPinned, nth: 1, measured: false, evidence: []string{"pinned vs pageable D2H"}},
				{topic: TopicWriteCombined, measured: false, evidence: []string{"write-combined: not measured on integrated GPUs"}},
				{topic: TopicAllocation, measured: true, advice: []string{"60 ns against 20 ms for cuMemHostAlloc"}},
				{topic: TopicAllocation, nth: 1, measured: false, evidence: []string{"cuMemHostRegister per GiB", "not supported on this device"}},
				{topic: TopicOptions, measured: true, advice: []string{"cudahost.Options{Mapped: true}"}, not: []string{"Method", "DirectBelow"}},
			},
		},
		{
			name: "write-combined helps",
			report: func() *measure.Report {
				r := h200Report()
				setGBps(r, measure.WriteCombined, measure.H2D, func(t measure.Transfer) (float64, bool) {
					return 1.1 * gbpsOf(r, measure.Pinned, measure.H2D, t.Size), t.Size >= 1<<20
				})
				return r
			},
			want: []want{
				{topic: TopicWriteCombined, measured: true,
					advice:   []string{"Use write-combined memory", "upload-only", "10% faster", "reads it very slowly"},
					evidence: []string{"1.10×", "write-combined 60.9 GB/s vs pinned 55.4 GB/s"}},
				{topic: TopicOptions, measured: true, advice: []string{"WriteCombined: true", "cudahost.Register"}},
			},
		},
		{
			name: "write-combined 4% faster is not enough",
			report: func() *measure.Report {
				r := h200Report()
				setGBps(r, measure.WriteCombined, measure.H2D, func(t measure.Transfer) (float64, bool) {
					return 1.04 * gbpsOf(r, measure.Pinned, measure.H2D, t.Size), true
				})
				return r
			},
			want: []want{{topic: TopicWriteCombined, measured: true, advice: []string{"Do not use", "not 5% faster", "1.04×"}}},
		},
		{
			name: "mapped wins small reads",
			report: func() *measure.Report {
				r := h200Report()
				setGBps(r, measure.Mapped, measure.H2D, func(t measure.Transfer) (float64, bool) {
					return 1.3 * gbpsOf(r, measure.Pinned, measure.H2D, t.Size), t.Size <= 64<<10
				})
				return r
			},
			want: []want{{topic: TopicMapped, measured: true, advice: []string{"mapped memory up to 64 KiB", "copy larger data from pinned"}, evidence: []string{"64 KiB 1.30×", "256 KiB 0.76×"}}},
		},
		{
			name: "mapped wins large reads",
			report: func() *measure.Report {
				r := h200Report()
				setGBps(r, measure.Mapped, measure.H2D, func(t measure.Transfer) (float64, bool) {
					return 1.02 * gbpsOf(r, measure.Pinned, measure.H2D, t.Size), t.Size >= 64<<20
				})
				return r
			},
			want: []want{{topic: TopicMapped, measured: true, advice: []string{"from 64 MiB on", "copy smaller data"}}},
		},
		{
			name: "mapped cannot be used",
			report: func() *measure.Report {
				r := h200Report()
				r.Machine.CanMapHostMemory = false
				r.Transfers = slices.DeleteFunc(r.Transfers, func(t measure.Transfer) bool { return t.Kind == measure.Mapped })
				r.Skipped = []string{"mapped: the device cannot map host memory"}
				return r
			},
			want: []want{{topic: TopicMapped, measured: true, advice: []string{"NVIDIA H200 cannot map host memory"},
				evidence: []string{"canMapHostMemory = 0", "mapped: the device cannot map host memory"}}},
		},
		{
			name: "pinned does not pay",
			report: func() *measure.Report {
				r := h200Report()
				setGBps(r, measure.Pinned, measure.H2D, func(t measure.Transfer) (float64, bool) {
					return 1.1 * gbpsOf(r, measure.Pageable, measure.H2D, t.Size), true
				})
				return r
			},
			want: []want{{topic: TopicPinned, measured: true, advice: []string{"Keep H2D data in pageable memory", "does not pay", "1 GiB"}, evidence: []string{"(1.10×)"}}},
		},
		{
			name: "staged never beats pageable",
			report: func() *measure.Report {
				r := h200Report()
				for _, d := range []measure.Direction{measure.H2D, measure.D2H} {
					setGBps(r, measure.Staged, d, func(t measure.Transfer) (float64, bool) {
						return 0.8 * gbpsOf(r, measure.Pageable, d, t.Size), true
					})
				}
				return r
			},
			want: []want{
				{topic: TopicStaged, measured: true, advice: []string{"Do not stage H2D"}, evidence: []string{"staged 7.5 GB/s vs pageable 9.37 GB/s", "0.80×"}},
				{topic: TopicStaged, nth: 1, measured: true, advice: []string{"Do not stage D2H"}},
				{topic: TopicDirectBelow, measured: true, advice: []string{"DirectBelow: math.MaxInt"}, evidence: []string{"H2D: staged is not faster than pageable at 1 GiB (0.80×)"}},
				{topic: TopicRegistered, measured: true, advice: []string{"transfer.Copier.Register"}},
				{topic: TopicOptions, measured: true, advice: []string{"transfer.Options{DirectBelow: math.MaxInt}"}},
			},
		},
		{
			name: "staged wins at every size",
			report: func() *measure.Report {
				r := h200Report()
				for _, d := range []measure.Direction{measure.H2D, measure.D2H} {
					setGBps(r, measure.Staged, d, func(t measure.Transfer) (float64, bool) {
						return 1.5 * gbpsOf(r, measure.Pageable, d, t.Size), true
					})
				}
				return r
			},
			want: []want{{topic: TopicDirectBelow, measured: true, advice: []string{"DirectBelow: 4 << 10} (4 KiB)"}, evidence: []string{"every size measured"}}},
		},
		{
			name: "staged wins in one direction only",
			report: func() *measure.Report {
				r := h200Report()
				setGBps(r, measure.Staged, measure.D2H, func(t measure.Transfer) (float64, bool) {
					return 0.5 * gbpsOf(r, measure.Pageable, measure.D2H, t.Size), true
				})
				return r
			},
			want: []want{{topic: TopicDirectBelow, measured: true, advice: []string{"DirectBelow: 2 << 20}"}, evidence: []string{"D2H: staged is not faster", "left out"}}},
		},
		{
			name: "registration does not beat staging",
			report: func() *measure.Report {
				r := h200Report()
				for _, d := range []measure.Direction{measure.H2D, measure.D2H} {
					setGBps(r, measure.Registered, d, func(t measure.Transfer) (float64, bool) {
						return 0.9 * gbpsOf(r, measure.Staged, d, t.Size), true
					})
				}
				return r
			},
			want: []want{{topic: TopicRegistered, measured: true, advice: []string{"Do not register"}, evidence: []string{"(0.90×)"}}},
		},
		{
			name: "cuMemHostAlloc cheaper than registration",
			report: func() *measure.Report {
				r := h200Report()
				for i, a := range r.Allocs {
					if a.Op == measure.OpRegister {
						r.Allocs[i].Median = a.Median * 20
					}
				}
				return r
			},
			want: []want{
				{topic: TopicAllocation, nth: 1, measured: true, advice: []string{"cudahost.Options{Method: cudahost.HostAlloc}", "624 ms per GiB against"}},
				{topic: TopicOptions, measured: true, advice: []string{"Method: cudahost.HostAlloc"}, not: []string{"HugePages"}},
			},
		},
		{
			name: "bad figures count as missing",
			report: func() *measure.Report {
				r := h200Report()
				for i, t := range r.Transfers {
					switch {
					case t.Kind == measure.Pinned && t.Dir == measure.H2D && t.Size == 1<<30:
						r.Transfers[i].GBps, r.Transfers[i].Median = math.NaN(), 0
					case t.Kind == measure.Pageable && t.Dir == measure.H2D && t.Size == 256<<20:
						r.Transfers[i].GBps, r.Transfers[i].Median = -1, -time.Second
					case t.Kind == measure.Pinned && t.Dir == measure.D2H && t.Size == 1<<30:
						r.Transfers[i].GBps = 0 // the median time still gives 55.2 GB/s
					case t.Kind == measure.Staged && t.Dir == measure.H2D && t.Size == 1<<30:
						r.Transfers[i].GBps, r.Transfers[i].Median = math.Inf(1), 0
					}
				}
				for i, a := range r.Allocs {
					if a.Op == measure.OpPoolHit {
						r.Allocs[i].Median = -41
					}
				}
				for i := range r.Pool {
					r.Pool[i].OpsPerSec = math.NaN() // Ops over Elapsed still valid
				}
				return r
			},
			want: []want{
				{topic: TopicPinned, measured: true, evidence: []string{"at 64 MiB H2D"}, not: []string{"1 GiB 5.9×", "256 MiB"}},
				{topic: TopicPinned, nth: 1, measured: true, evidence: []string{"pinned 55.2 GB/s vs pageable 17.2 GB/s at 1 GiB D2H"}},
				{topic: TopicStaged, measured: true, evidence: []string{"at 64 MiB H2D"}}, // 1 GiB staged and 256 MiB pageable are bad
				{topic: TopicAllocation, measured: true, evidence: []string{"not measured: the pool hit"}},
				{topic: TopicPool, measured: true, advice: []string{"158×"}},
			},
		},
		{
			name: "no GPU",
			report: func() *measure.Report {
				r := &measure.Report{Machine: measure.Machine{GOOS: "linux", CPUs: 2, NoGPU: "no CUDA driver (libcuda.so.1 not found)"},
					Skipped: []string{"transfers: no GPU"}}
				r.Transfers = []measure.Transfer{row(measure.Pageable, measure.H2D, 1<<20, 5)} // ignored without a GPU
				r.Allocs = []measure.Alloc{
					alloc(measure.OpMmapLock, 64<<10, 30*time.Microsecond), alloc(measure.OpMmapLock, frame, 400*time.Microsecond),
					alloc(measure.OpMmapLock, 1<<30, 120*time.Millisecond), alloc(measure.OpMunmap, 1<<30, 40*time.Millisecond),
					alloc(measure.OpPoolHit, frame, 45)}
				r.Pool = []measure.PoolRun{poolRun(measure.ImplPinpool, 1, 22e6), poolRun(measure.ImplSeed, 1, 8e6),
					poolRun(measure.ImplPinpool, 2, 40e6), poolRun(measure.ImplSeed, 2, 6e6), poolRun(measure.ImplPinpool, 4, 70e6)}
				return r
			},
			topics: []string{TopicGPU, TopicAllocation, TopicPool, TopicOptions},
			want: []want{
				{topic: TopicGPU, measured: true, advice: []string{"GPU rules were skipped"}, evidence: []string{"no CUDA driver (libcuda.so.1 not found)"}},
				{topic: TopicAllocation, measured: true, advice: []string{"45 ns against 400 µs for mmap+mlock"}, evidence: []string{"mmap+mlock", "munmap 40 ms"}},
				{topic: TopicPool, measured: true, advice: []string{"2 goroutines", "6.7×"}, evidence: []string{"1 goroutine", "2.8×"}, not: []string{"4 goroutines"}},
				{topic: TopicOptions, measured: true, advice: []string{"pinpool.NewHostBackend(hostmem.Options{})"}, not: []string{"cudahost", "DirectBelow"}},
			},
		},
		{
			name:   "empty",
			report: func() *measure.Report { return &measure.Report{} },
			want: []want{
				{topic: TopicPinned, measured: false, advice: []string{"not measured"}, evidence: []string{"pinned vs pageable H2D"}},
				{topic: TopicMapped, measured: false},
				{topic: TopicAllocation, nth: 1, measured: false},
				{topic: TopicPool, measured: false},
				{topic: TopicOptions, measured: false},
			},
		},
		{
			name:   "nil",
			report: func() *measure.Report { return nil },
			want:   []want{{topic: TopicOptions, measured: false}},
		},
		{
			name: "skipped lines explain missing data",
			report: func() *measure.Report {
				return &measure.Report{Machine: measure.Machine{GPU: "NVIDIA H200", CanMapHostMemory: true},
					Skipped: []string{"staged: --quick run", "pool: seed design not built"}}
			},
			want: []want{
				{topic: TopicStaged, measured: false, evidence: []string{"(skipped: staged: --quick run)"}},
				{topic: TopicPool, measured: false, evidence: []string{"pool: seed design not built"}},
				{topic: TopicPinned, measured: false, not: []string{"skipped"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			adv := Advise(tt.report())
			wantTopics := tt.topics
			if wantTopics == nil {
				wantTopics = gpuTopics
			}
			if got := topics(adv); !slices.Equal(got, wantTopics) {
				t.Errorf("topics = %v, want %v", got, wantTopics)
			}
			check(t, adv, tt.want)
			for _, a := range adv {
				if a.Advice == "" || a.Evidence == "" {
					t.Errorf("%s: empty advice or evidence: %+v", a.Topic, a)
				}
				if tt.name == "empty" || tt.name == "nil" {
					if a.Measured {
						t.Errorf("%s: Measured in an empty report: %s", a.Topic, a.Advice)
					}
				}
			}
			checkText(t, adv)
		})
	}
}

// checkText fails on a figure that is not finite in any text.
func checkText(t *testing.T, adv []Advice) {
	t.Helper()
	for _, a := range adv {
		for _, s := range []string{a.Topic, a.Advice, a.Evidence} {
			for _, bad := range []string{"NaN", "Inf", "?"} {
				if strings.Contains(s, bad) {
					t.Errorf("%s: %q in %q", a.Topic, bad, s)
				}
			}
		}
	}
}

func TestCrossover(t *testing.T) {
	ps := []point{{size: 1 << 20, ratio: 0.5}, {size: 4 << 20, ratio: 1.5}, {size: 16 << 20, ratio: 2}}
	c := crossover(measure.H2D, ps)
	if math.Abs(c.at-float64(2<<20)) > 1 {
		t.Errorf("crossover at %v, want 2 MiB (the log-scale midpoint)", c.at)
	}
	// A dip below 1 at the largest size: staging does not win from any size on.
	ps[2].ratio = 0.9
	if c := crossover(measure.H2D, ps); c.at != 0 {
		t.Errorf("crossover at %v with a loss at the largest size, want none", c.at)
	}
}
