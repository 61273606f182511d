package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cuda"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// stressJSON runs stress with --json and parses the report.
func stressJSON(t *testing.T, wantCode int, args ...string) (*stressReport, string) {
	t.Helper()
	out, errOut, code := runCLI(t, append([]string{"stress", "--json"}, args...)...)
	if code != wantCode {
		t.Fatalf("stress %q: exit %d, want %d; stderr:\n%s", args, code, wantCode, errOut)
	}
	var r stressReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("JSON does not parse: %v\n%s", err, out)
	}
	return &r, errOut
}

// checkBackendLine checks the one stderr line that names the backend.
func checkBackendLine(t *testing.T, stderr string) {
	t.Helper()
	noGPU := strings.Count(stderr, "host backend: no GPU (")
	gpu := strings.Count(stderr, "backend: cuda")
	if cuda.Load() != nil {
		if noGPU != 1 || gpu != 0 {
			t.Errorf("want one host-backend line, stderr:\n%s", stderr)
		}
	} else if gpu+noGPU != 1 {
		t.Errorf("want one backend line, stderr:\n%s", stderr)
	}
}

func TestStressText(t *testing.T) {
	needLockable(t, 3<<20)
	out, errOut, code := runCLI(t, "stress", "--goroutines", "4", "--iterations", "20", "--sleep-scale", "0.1", "--size", "3MiB")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	checkBackendLine(t, errOut)
	for _, want := range []string{"4 goroutines × 20 iterations of 3 MiB (3145728 bytes)", "ops/s", "p50", "p99", "max", "hits", "misses", "held", "peak", "allocs"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^pinpool\s+\S+`).MatchString(out) {
		t.Errorf("no pinpool row:\n%s", out)
	}
	if n := strings.Count(out, "\n"); n != 5 { // workload (two lines), memory, header, one contender
		t.Errorf("%d lines, want 5:\n%s", n, out)
	}
}

func TestStressJSONAllContenders(t *testing.T) {
	needLockable(t, 2<<20) // the seed pool grows by 4 buffers of 256 KiB
	r, errOut := stressJSON(t, 0, "--goroutines", "3", "--iterations", "15", "--warmup", "5", "--sleep-scale", "0",
		"--size", "256KiB", "--compare-raw", "--compare-seed", "--no-exact")
	checkBackendLine(t, errOut)
	if r.Workload.Goroutines != 3 || r.Workload.Iterations != 15 || r.Workload.Warmup != 5 || r.Workload.Size != 256<<10 ||
		r.Workload.Exact || r.Workload.Get != "TryGet" {
		t.Errorf("workload %+v", r.Workload)
	}
	if (r.NoGPU != "") != (cuda.Load() != nil) || r.Backend == "" {
		t.Errorf("backend %q, no_gpu %q", r.Backend, r.NoGPU)
	}
	if len(r.Results) != 3 {
		t.Fatalf("results %+v", r.Results)
	}
	for i, name := range []string{"pinpool", "seed", "raw"} {
		res := r.Results[i]
		if res.Name != name || res.Memory == "" {
			t.Errorf("result %d: %q on %q, want %s", i, res.Name, res.Memory, name)
		}
		if res.Ops != 45 || res.Failures != 0 || res.WarmupFailures != 0 || res.FirstError != "" {
			t.Errorf("%s: ops %d, failures %d+%d (%s)", name, res.Ops, res.Failures, res.WarmupFailures, res.FirstError)
		}
		if res.OpsPerSecond <= 0 || res.DurationNs <= 0 || res.P50Ns <= 0 || res.P50Ns > res.P99Ns || res.P99Ns > res.MaxNs {
			t.Errorf("%s: timing %+v", name, res)
		}
	}
	pool, seed, raw := r.Results[0], r.Results[1], r.Results[2]
	if pool.Hits == nil || pool.Misses == nil || *pool.Hits+*pool.Misses != 45 {
		t.Errorf("pinpool hits %v misses %v, want 45 in all", pool.Hits, pool.Misses)
	}
	if pool.BytesHeld < 256<<10 || pool.PeakBytesHeld < pool.BytesHeld {
		t.Errorf("pinpool held %d, peak %d", pool.BytesHeld, pool.PeakBytesHeld)
	}
	if seed.Hits != nil || seed.Misses != nil || seed.BytesHeld < 256<<10 {
		t.Errorf("seed %+v", seed)
	}
	if raw.DriverAllocs != 45 || raw.Misses == nil || *raw.Misses != 45 || *raw.Hits != 0 || raw.BytesHeld != 0 || raw.PeakBytesHeld < 256<<10 {
		t.Errorf("raw %+v", raw)
	}
	if want := "cuMemHostAlloc"; cuda.Load() == nil && !strings.HasPrefix(raw.Memory, want) {
		t.Errorf("raw memory %q with a GPU", raw.Memory)
	} else if cuda.Load() != nil && raw.Memory != "mmap+mlock+munmap" {
		t.Errorf("raw memory %q without a GPU", raw.Memory)
	}
}

// TestStressReserve: a pool pre-warmed for every goroutine never grows
// during the measured pass, even without a warm-up.
func TestStressReserve(t *testing.T) {
	needLockable(t, lockFrame)
	r, _ := stressJSON(t, 0, "--goroutines", "4", "--iterations", "10", "--warmup", "0", "--sleep-scale", "0.2", "--reserve")
	res := r.Results[0]
	want := 4
	// Under a lock limit that holds fewer frames (an ordinary user's 8 MiB
	// holds 2), --reserve keeps what fits: those are all the frames held.
	if _, held, ok := strings.Cut(r.Workload.Get, "at most "); ok {
		fmt.Sscanf(held, "%d frames", &want)
	}
	if r.Workload.Reserved != want || res.DriverAllocs != 0 || *res.Misses != 0 || *res.Hits != 40 {
		t.Errorf("reserved %d: %+v", r.Workload.Reserved, res)
	}
}

// TestStressBudgetBelowFrame: a budget smaller than one frame can serve
// no get: a usage error before anything is allocated, in the user's units,
// whatever the get (TryGet, or Get that would wait).
func TestStressBudgetBelowFrame(t *testing.T) {
	for _, extra := range [][]string{nil, {"--wait", "10s"}} {
		args := append([]string{"stress", "--budget", "1MiB", "--iterations", "5"}, extra...)
		out, errOut, code := runCLI(t, args...)
		if code != 2 || strings.Contains(out, "contender") || !strings.Contains(errOut, "--budget 1MiB: want 0 (none) or at least one buffer of --size 3110400 (2.97 MiB") {
			t.Errorf("%q: exit %d, stdout %q, stderr:\n%s", args, code, out, errOut)
		}
	}
}

func TestStressUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--goroutines", "0"}, {"--iterations", "0"}, {"--iterations", "many"}, {"--size", "3XB"}, {"--size", "0"},
		{"--size", "-1"}, {"--sleep-scale", "-1"}, {"--sleep-scale", "NaN"}, {"--warmup", "-2"}, {"--wait", "-1s"},
		{"--budget", "lots"}, {"--no-such-flag"}, {"--size", "2TiB"},
	} {
		_, errOut, code := runCLI(t, append([]string{"stress"}, args...)...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, code, errOut)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStressMetricsEndpoint scrapes the metrics endpoint with a real HTTP
// client while a stress run (slowed down by its sleep scale) is going on.
func TestStressMetricsEndpoint(t *testing.T) {
	needLockable(t, lockFrame)
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"stress", "--metrics-addr", "127.0.0.1:0", "--goroutines", "4", "--iterations", "100",
			"--warmup", "5", "--sleep-scale", "20"}, &stdout, &stderr)
	}()
	re := regexp.MustCompile(`metrics: serving (http://127\.0\.0\.1:\d+/metrics)`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == ""; {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("stress ended (exit %d) before serving metrics; stderr:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no metrics line; stderr:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}

	client := &http.Client{Timeout: 5 * time.Second}
	scrape := func() (map[string]*dto.MetricFamily, error) {
		resp, err := client.Get(url)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", url, resp.Status)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		return p.TextToMetricFamilies(resp.Body)
	}
	var gets []float64
	for range 3 {
		fams, err := scrape()
		if err != nil {
			t.Fatalf("scrape during the run: %v", err)
		}
		f := fams["pinpool_gets_total"]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("pinpool_gets_total: %v", f)
		}
		m := f.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["pool"] != "stress" || labels["backend"] == "" {
			t.Errorf("labels %v", labels)
		}
		gets = append(gets, m.GetCounter().GetValue())
		if fams["pinpool_memory_bytes"] == nil || fams["pinpool_class_buffers"] == nil {
			t.Errorf("metrics missing: %v", fams)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case code := <-done:
		t.Fatalf("the run ended (exit %d) before the scrapes did: make it longer", code)
	default:
	}
	if gets[2] <= gets[0] {
		t.Errorf("gets did not advance during the run: %v", gets)
	}
	if code := <-done; code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	if _, err := scrape(); err == nil {
		t.Error("the metrics server still answers after the run")
	}
	if !strings.Contains(stdout.String(), "pinpool ") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
}

func TestStressBadMetricsAddr(t *testing.T) {
	_, errOut, code := runCLI(t, "stress", "--metrics-addr", "256.0.0.1:http-nope", "--iterations", "1")
	if code != 1 || !strings.Contains(errOut, "--metrics-addr") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestFormatNs(t *testing.T) {
	for _, tt := range []struct {
		ns   int64
		want string
	}{{42, "42 ns"}, {1500, "1.5 µs"}, {979_000, "979 µs"}, {999_700, "1000 µs"}, {1_170_000, "1.17 ms"}, {2_500_000_000, "2.5 s"}} {
		if got := formatNs(tt.ns); got != tt.want {
			t.Errorf("formatNs(%d) = %q, want %q", tt.ns, got, tt.want)
		}
	}
}
