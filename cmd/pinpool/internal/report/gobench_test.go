package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/perf/benchfmt"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// benchName is the name a size has in the fixture's benchmark names,
// written out here rather than with the package's formatter.
var benchName = map[int64]string{
	4 * kib: "4KiB", 64 * kib: "64KiB", mib: "1MiB", 16 * mib: "16MiB", 256 * mib: "256MiB", gib: "1GiB",
}

// wantResult is a benchmark line as benchfmt reads it back.
type wantResult struct {
	name   string // without "Benchmark"
	iters  int
	values map[string]float64 // by the unit as written (ns/op, not sec/op)
}

// wantResults is what WriteGoBench must write for r, built from the rows.
func wantResults(t *testing.T, r *measure.Report, poolSize bool) []wantResult {
	size := func(n int64) string {
		s, ok := benchName[n]
		if !ok {
			t.Fatalf("no benchmark name for size %d", n)
		}
		return s
	}
	var out []wantResult
	for _, x := range r.Transfers {
		out = append(out, wantResult{
			name:   fmt.Sprintf("Transfer/kind=%s/dir=%s/size=%s", x.Kind, x.Dir, size(x.Size)),
			iters:  x.Repeats,
			values: map[string]float64{"ns/op": float64(x.Median), "GB/s": x.GBps},
		})
	}
	for _, a := range r.Allocs {
		out = append(out, wantResult{
			name:   fmt.Sprintf("Alloc/op=%s/size=%s", a.Op, size(a.Size)),
			iters:  a.Repeats,
			values: map[string]float64{"ns/op": float64(a.Median)},
		})
	}
	for _, p := range r.Pool {
		name := fmt.Sprintf("Pool/impl=%s/goroutines=%d", p.Impl, p.Goroutines)
		if poolSize {
			name = fmt.Sprintf("Pool/impl=%s/size=%s/goroutines=%d", p.Impl, size(p.Size), p.Goroutines)
		}
		out = append(out, wantResult{
			name:   name,
			iters:  int(p.Ops),
			values: map[string]float64{"ns/op": p.NsPerOp, "ops/s": p.OpsPerSec},
		})
	}
	for _, h := range r.HostCopies {
		out = append(out, wantResult{
			name:   fmt.Sprintf("HostCopy/size=%s/threads=%d", size(h.Size), h.Threads),
			iters:  h.Repeats,
			values: map[string]float64{"ns/op": float64(int64(h.Median)), "GB/s": h.GBps},
		})
	}
	return out
}

func TestWriteGoBench(t *testing.T) {
	twoSizes := noGPUReport()
	twoSizes.Pool = append(twoSizes.Pool, poolRun(measure.ImplPinpool, 1, 64*kib, 30, "host"))

	tests := []struct {
		name     string
		report   *measure.Report
		poolSize bool              // pool names carry /size=
		config   map[string]string // every configuration key and value
		lines    []string          // lines expected verbatim
	}{
		{
			name:   "h200",
			report: h200Report(),
			config: map[string]string{
				"goos": "linux", "goarch": "amd64", "pkg": "github.com/pinpool/pinpool/cmd/pinpool",
				"cpu": "Intel(R) Xeon(R) Platinum 8480+", "gpu": "NVIDIA H200", "driver": "13.0",
			},
			lines: []string{
				"BenchmarkTransfer/kind=pinned/dir=H2D/size=4KiB 1000 7574 ns/op 0.5407974650118827 GB/s",
				"BenchmarkAlloc/op=cuMemHostAlloc/size=1MiB 50 174000 ns/op",
				"BenchmarkPool/impl=pinpool/goroutines=16 320000000 50 ns/op 3.2e+08 ops/s",
			},
		},
		{
			name:   "no GPU",
			report: noGPUReport(),
			config: map[string]string{
				"goos": "linux", "goarch": "arm64", "pkg": "github.com/pinpool/pinpool/cmd/pinpool",
			},
			lines: []string{"BenchmarkAlloc/op=mmap+mlock/size=1GiB 3 9.2162e+07 ns/op"},
		},
		{
			name:     "pool at two sizes",
			report:   twoSizes,
			poolSize: true,
			config: map[string]string{
				"goos": "linux", "goarch": "arm64", "pkg": "github.com/pinpool/pinpool/cmd/pinpool",
			},
			lines: []string{"BenchmarkPool/impl=pinpool/size=64KiB/goroutines=1 33333333 30.000000300000004 ns/op 3.3333333e+07 ops/s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteGoBench(&buf, tt.report); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, l := range tt.lines {
				if !strings.Contains(out, "\n"+l+"\n") {
					t.Errorf("no line %q in:\n%s", l, out)
				}
			}

			want := wantResults(t, tt.report, tt.poolSize)
			rd := benchfmt.NewReader(strings.NewReader(out), "bench.txt")
			i := 0
			for rd.Scan() {
				switch rec := rd.Result().(type) {
				case *benchfmt.SyntaxError:
					t.Errorf("syntax error: %v", rec)
				case *benchfmt.Result:
					if i >= len(want) {
						t.Errorf("extra result %s", rec.Name.Full())
						continue
					}
					w := want[i]
					i++
					if got := string(rec.Name.Full()); got != w.name {
						t.Errorf("result %d: name %q, want %q", i, got, w.name)
					}
					if rec.Iters != w.iters {
						t.Errorf("%s: iterations %d, want %d", w.name, rec.Iters, w.iters)
					}
					if len(rec.Values) != len(w.values) {
						t.Errorf("%s: %d values, want %d", w.name, len(rec.Values), len(w.values))
					}
					for _, v := range rec.Values {
						unit, val := v.Unit, v.Value
						if v.OrigUnit != "" { // benchfmt turns ns/op into sec/op
							unit, val = v.OrigUnit, v.OrigValue
						}
						if wv, ok := w.values[unit]; !ok || val != wv {
							t.Errorf("%s: %v %s, want %v (present: %v)", w.name, val, unit, wv, ok)
						}
					}
					var keys []string
					for _, c := range rec.Config {
						if c.File {
							keys = append(keys, c.Key)
							if want, ok := tt.config[c.Key]; !ok || string(c.Value) != want {
								t.Errorf("%s: config %s = %q, want %q (expected: %v)", w.name, c.Key, c.Value, want, ok)
							}
						}
					}
					if len(keys) != len(tt.config) {
						t.Errorf("%s: config keys %q, want those of %v", w.name, keys, tt.config)
					}
				}
			}
			if err := rd.Err(); err != nil {
				t.Fatal(err)
			}
			if i != len(want) {
				t.Errorf("read %d results, want %d", i, len(want))
			}
			units := rd.Units()
			if len(tt.report.Transfers) > 0 && units.GetBetter("GB/s") != 1 {
				t.Error("GB/s is not marked better=higher")
			}
			if len(tt.report.Pool) > 0 && units.GetBetter("ops/s") != 1 {
				t.Error("ops/s is not marked better=higher")
			}
		})
	}
}

func TestWriteGoBenchNameParts(t *testing.T) {
	r := &measure.Report{
		Transfers: []measure.Transfer{{Kind: "odd kind/x", Dir: measure.H2D, Size: 1536, Repeats: 1, Median: 100, GBps: 15.36}},
		Allocs:    []measure.Alloc{{Op: "", Size: 1000, Repeats: 2, Median: 5}},
	}
	var buf bytes.Buffer
	if err := WriteGoBench(&buf, r); err != nil {
		t.Fatal(err)
	}
	rd := benchfmt.NewReader(&buf, "bench.txt")
	var names []string
	for rd.Scan() {
		if res, ok := rd.Result().(*benchfmt.Result); ok {
			names = append(names, string(res.Name.Full()))
		}
	}
	want := []string{"Transfer/kind=odd_kind_x/dir=H2D/size=1.5KiB", "Alloc/op=none/size=1000B"}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Errorf("names %q, want %q", names, want)
	}
}

// TestWriteGoBenchRuns: a row with runs has one line per run, as go test
// -count does, so that benchstat gets a sample per run (before: one line
// per row, "need >= 6 samples for confidence interval").
func TestWriteGoBenchRuns(t *testing.T) {
	r := h200Report()
	r.Transfers = r.Transfers[:1]
	r.Allocs, r.Pool, r.HostCopies = nil, nil, nil
	tr := &r.Transfers[0]
	for i := range 10 {
		tr.Runs = append(tr.Runs, measure.RepeatRun{N: 5, Mean: tr.Median + time.Duration(i)})
	}
	var b bytes.Buffer
	if err := WriteGoBench(&b, r); err != nil {
		t.Fatal(err)
	}
	rd := benchfmt.NewReader(&b, "gobench")
	lines := 0
	for rd.Scan() {
		res, ok := rd.Result().(*benchfmt.Result)
		if !ok {
			continue
		}
		lines++
		if res.Iters != 5 {
			t.Errorf("iterations %d, want 5", res.Iters)
		}
		if ns, _ := res.Value("sec/op"); ns <= 0 {
			t.Errorf("no time: %+v", res.Values)
		}
		if gbps, ok := res.Value("GB/s"); !ok || gbps <= 0 {
			t.Errorf("no rate: %+v", res.Values)
		}
	}
	if lines != 10 {
		t.Errorf("%d lines for a row of 10 runs, want 10:\n%s", lines, b.String())
	}
}
