package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"github.com/pinpool/pinpool/cuda"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
	"golang.org/x/perf/benchfmt"
)

// smallBench are flags for a bench run that takes well under a second and
// stays within a small RLIMIT_MEMLOCK.
var smallBench = []string{
	"bench", "--sizes", "4KiB,64KiB", "--repeats", "2", "--min-time", "1ms", "--rotate", "1MiB",
	"--alloc-sizes", "4KiB", "--alloc-calls", "2", "--goroutines", "1,2", "--pool-time", "10ms", "--pool-size", "4KiB",
	"--copy-sizes", "64KiB,1MiB",
}

func benchCLI(t *testing.T, extra ...string) (stdout, stderr string) {
	t.Helper()
	out, errOut, code := runCLI(t, append(append([]string(nil), smallBench...), extra...)...)
	if code != 0 {
		t.Fatalf("bench %q: exit %d; stderr:\n%s", extra, code, errOut)
	}
	return out, errOut
}

// hasGPU reports whether bench can measure transfers here: a driver with
// a device.
func hasGPU() bool {
	n, err := cuda.DeviceCount()
	return err == nil && n > 0
}

func TestBenchTable(t *testing.T) {
	out, errOut := benchCLI(t)
	for _, want := range []string{"date:", "command:  pinpool bench --sizes 4KiB,64KiB", "Allocations", "pool-hit", "Pool: Get+Release", "pinpool/seed"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if hasGPU() {
		if !strings.Contains(out, "pinned") || !strings.Contains(out, "cuMemHostAlloc") {
			t.Errorf("GPU table lacks transfer or driver allocation rows:\n%s", out)
		}
		return
	}
	// The reason is said once, in one short line: the table's gpu line.
	if errOut != "" || strings.Count(out, "libcuda") != 1 || !strings.Contains(out, "gpu:      none (libcuda.so.1 not found; set PINPOOL_LIBCUDA to its path)") {
		t.Errorf("without a GPU want the reason once, in the gpu line; stdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if !strings.Contains(out, "mmap+mlock") || !strings.Contains(out, "skipped: transfers: no GPU") {
		t.Errorf("host table lacks host allocation rows or the skipped line:\n%s", out)
	}
}

func TestBenchJSON(t *testing.T) {
	out, errOut := benchCLI(t, "--json")
	var r measure.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("JSON does not parse: %v\n%s", err, out)
	}
	if !hasGPU() && strings.Count(errOut, "gpu: none (") != 1 {
		t.Errorf("without a GPU, JSON output should say so once on stderr:\n%s", errOut)
	}
	if len(r.Pool) != 4 || len(r.Allocs) == 0 || !strings.HasPrefix(r.Command, "pinpool bench") {
		t.Errorf("report %+v", r)
	}
	if hasGPU() != (len(r.Transfers) > 0) {
		t.Errorf("GPU %v but %d transfer rows", hasGPU(), len(r.Transfers))
	}
}

func TestBenchCSV(t *testing.T) {
	out, _ := benchCLI(t, "--csv")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 2 || recs[0][0] != "section" || recs[0][5] != "size_bytes" {
		t.Fatalf("CSV header %q, %d records", recs[0], len(recs))
	}
	sections := map[string]int{}
	for _, rec := range recs[1:] {
		sections[rec[0]]++
	}
	if sections["pool"] != 4 || sections["alloc"] == 0 {
		t.Errorf("CSV sections %v", sections)
	}
}

// goBenchSamples parses a --gobench output with benchfmt's reader, as
// benchstat does, and returns the lines (samples) of each benchmark.
func goBenchSamples(t *testing.T, out string) map[string]int {
	t.Helper()
	rd := benchfmt.NewReader(strings.NewReader(out), "bench.txt")
	lines := map[string]int{}
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.Result:
			name := string(rec.Name)
			lines[name]++
			if rec.Iters < 1 || len(rec.Values) == 0 {
				t.Errorf("result %s: %d iterations, values %v", name, rec.Iters, rec.Values)
			}
		case *benchfmt.SyntaxError:
			t.Errorf("benchfmt: %v", rec)
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestBenchGoBench: every benchmark of --gobench has as many samples as
// --repeats asks (allocations: one per call), so that benchstat shows a
// spread for each. Before, a pool point had one line (benchstat: "± ∞")
// and an allocation of 64 MiB or more three.
func TestBenchGoBench(t *testing.T) {
	out, _ := benchCLI(t, "--gobench") // --repeats 2, --alloc-calls 2
	lines := goBenchSamples(t, out)
	pool := 0
	for name, n := range lines {
		if n != 2 {
			t.Errorf("%s: %d lines, want 2 (--repeats 2, --alloc-calls 2)", name, n)
		}
		if strings.HasPrefix(name, "Pool/") {
			pool++
		}
	}
	if pool != 4 {
		t.Errorf("%d pool benchmarks, want 4:\n%s", pool, out)
	}

	// The defaults: 10 repeats and allocation calls, 6 or more from 64 MiB.
	out, errOut, code := runCLI(t, "bench", "--gobench", "--progress", "never", "--sizes", "4KiB", "--min-time", "1ms", "--rotate", "1MiB",
		"--alloc-sizes", "4KiB,64MiB", "--goroutines", "1", "--pool-time", "20ms", "--pool-size", "4KiB", "--copy-sizes", "64KiB")
	if code != 0 {
		t.Fatalf("bench --gobench: exit %d\n%s", code, errOut)
	}
	lines = goBenchSamples(t, out)
	kinds := map[string]bool{}
	for name, n := range lines {
		kind, _, _ := strings.Cut(name, "/")
		kinds[kind] = true
		if large := strings.HasSuffix(name, "size=64MiB"); large && n < 6 || !large && n != 10 {
			t.Errorf("%s: %d lines, want 10 (6 or more for 64 MiB)", name, n)
		}
	}
	for _, k := range []string{"Pool", "Alloc", "HostCopy"} {
		if !kinds[k] {
			t.Errorf("no %s benchmark:\n%s", k, out)
		}
	}
}

// TestBenchPlot asks for a plot: a PNG, with a GPU or without (then it
// shows the allocation costs and the pools, which the README's main
// command promises on any machine).
func TestBenchPlot(t *testing.T) {
	t.Parallel() // rasterising the PNG is slow under -race: overlap it
	path := filepath.Join(t.TempDir(), "bw.png")
	_, errOut := benchCLI(t, "--plot", path)
	f, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; stderr:\n%s", err, errOut)
	}
	if _, err := png.Decode(bytes.NewReader(f)); err != nil {
		t.Fatalf("plot is not a PNG: %v", err)
	}
}

// TestBenchProgress forces the progress bar onto a buffer and checks that
// it drew something and that the report still went to stdout.
func TestBenchProgress(t *testing.T) {
	out, errOut := benchCLI(t, "--progress", "always", "--json")
	if !regexp.MustCompile(`\d+% .*\(\d+/\d+\)`).MatchString(errOut) {
		t.Errorf("no progress bar (percent and count) on stderr:\n%q", errOut)
	}
	if !json.Valid([]byte(out)) {
		t.Errorf("stdout is not JSON:\n%s", out)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--kinds", "pinned,zero-copy"},
		{"bench", "--directions", "up"},
		{"bench", "--plot", "bw.gif"},
		{"bench", "--sizes", "0"},
		{"bench", "--sizes", "4KiB,lots"},
		{"bench", "--sizes", "32GiB"},
		{"bench", "--json", "--csv"},
		{"bench", "--progress", "sometimes"},
		{"bench", "--goroutines", "0"},
		{"bench", "--pool-time", "-1s"},
		{"bench", "--no-such-flag"},
	} {
		out, errOut, code := runCLI(t, args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (usage); stderr:\n%s", args, code, errOut)
		}
		if out != "" && !strings.Contains(out, "Usage") {
			t.Errorf("%q: printed a report on a usage error:\n%s", args, out)
		}
	}
}

// TestBenchFrom renders a saved report in every format without measuring.
func TestBenchFrom(t *testing.T) {
	path := writeReport(t, gpuReport())
	out, errOut, code := runCLI(t, "bench", "--from", path)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	for _, want := range []string{"Test GPU", "H2D", "pinned", "staged", "batch", "cuMemHostAlloc", "pinpool/seed"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	js, _, code := runCLI(t, "bench", "--from", path, "--json")
	var r measure.Report
	if code != 0 || json.Unmarshal([]byte(js), &r) != nil || len(r.Transfers) != len(gpuReport().Transfers) {
		t.Fatalf("--from --json: exit %d, %d transfers", code, len(r.Transfers))
	}
	svg := filepath.Join(t.TempDir(), "bw.svg")
	if _, errOut, code := runCLI(t, "bench", "--from", path, "--gobench", "--plot", svg); code != 0 {
		t.Fatalf("--plot: exit %d; stderr:\n%s", code, errOut)
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Fatalf("plot %s: %v", svg, err)
	}
	if _, _, code := runCLI(t, "bench", "--from", filepath.Join(t.TempDir(), "none.json")); code != 1 {
		t.Errorf("missing --from file: exit %d, want 1", code)
	}
}
