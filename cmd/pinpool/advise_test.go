package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/advise"
	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// gpuReport is a small report as bench would save it on a discrete GPU:
// pinned at 50 GB/s, pageable at 10, staged at 40 from 4 MiB, registered at
// 50, mapped reads at 45, write-combined like pinned.
func gpuReport() *measure.Report {
	r := &measure.Report{
		Date: time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC), Command: "pinpool bench --json",
		Machine: measure.Machine{Hostname: "gpuhost", GPU: "Test GPU", Driver: "13.0", CanMapHostMemory: true, CPUs: 16},
	}
	bw := map[measure.Kind]func(size int64) float64{
		measure.Pageable:      func(int64) float64 { return 10 },
		measure.Pinned:        func(s int64) float64 { return 50 * float64(s) / float64(s+256<<10) },
		measure.WriteCombined: func(s int64) float64 { return 50 * float64(s) / float64(s+256<<10) },
		measure.Registered:    func(s int64) float64 { return 50 * float64(s) / float64(s+256<<10) },
		measure.Mapped:        func(s int64) float64 { return 45 * float64(s) / float64(s+64<<10) },
		measure.Staged:        func(s int64) float64 { return 40 * float64(s) / float64(s+4<<20) * 2 },
		measure.Batch:         func(s int64) float64 { return 20 * float64(s) / float64(s+1<<20) },
	}
	for _, k := range measure.Kinds {
		for _, d := range []measure.Direction{measure.H2D, measure.D2H} {
			for _, s := range []int64{4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20} {
				g := bw[k](s)
				r.Transfers = append(r.Transfers, measure.Transfer{Kind: k, Dir: d, Size: s, Repeats: 10, GBps: g,
					Median: time.Duration(float64(s) / g), Min: time.Duration(float64(s) / g), Max: time.Duration(float64(s) / g), Timer: "cuda-events"})
			}
		}
	}
	for _, s := range []int64{1 << 20, 16 << 20} {
		r.Allocs = append(r.Allocs,
			measure.Alloc{Op: measure.OpHostAlloc, Size: s, Repeats: 5, Median: time.Duration(s / 2)},
			measure.Alloc{Op: measure.OpFreeHost, Size: s, Repeats: 5, Median: time.Duration(s / 8)},
			measure.Alloc{Op: measure.OpRegister, Size: s, Repeats: 5, Median: time.Duration(s / 20)},
			measure.Alloc{Op: measure.OpUnregister, Size: s, Repeats: 5, Median: time.Duration(s / 40)},
			measure.Alloc{Op: measure.OpPoolHit, Size: s, Repeats: 5, Median: 40})
	}
	for _, g := range []int{1, 16} {
		r.Pool = append(r.Pool,
			measure.PoolRun{Impl: measure.ImplPinpool, Goroutines: g, Size: 65536, Ops: int64(g) * 20e6, Elapsed: time.Second, OpsPerSec: float64(g) * 20e6, NsPerOp: 50},
			measure.PoolRun{Impl: measure.ImplSeed, Goroutines: g, Size: 65536, Ops: 8e6, Elapsed: time.Second, OpsPerSec: 8e6, NsPerOp: 125 * float64(g)})
	}
	return r
}

func writeReport(t *testing.T, r *measure.Report) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bench.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAdviseFrom advises from a saved GPU report: every GPU topic appears,
// each measured line with its evidence, and the staged advice names the
// transfer engine.
func TestAdviseFrom(t *testing.T) {
	path := writeReport(t, gpuReport())
	out, errOut, code := runCLI(t, "advise", "--from", path)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	if !strings.HasPrefix(out, "Advice for Test GPU (driver 13.0) on gpuhost, measured 2026-11-30 07:00 UTC") {
		t.Errorf("header:\n%s", out)
	}
	for _, topic := range []string{"pinned-vs-pageable", "write-combined", "mapped", "staged", "direct-below", "allocation", "pool", "options"} {
		if !strings.Contains(out, topic) {
			t.Errorf("advice lacks topic %q:\n%s", topic, out)
		}
	}
	if !strings.Contains(out, "transfer.Copier") || !strings.Contains(out, "DirectBelow") {
		t.Errorf("advice does not name the transfer engine and its option:\n%s", out)
	}
	if strings.Contains(errOut, "no GPU") {
		t.Errorf("a GPU report advised as host-only:\n%s", errOut)
	}

	js, _, code := runCLI(t, "advise", "--from", path, "--json")
	var a []advise.Advice
	if code != 0 || json.Unmarshal([]byte(js), &a) != nil || len(a) < 8 {
		t.Fatalf("--json: exit %d, %d lines:\n%s", code, len(a), js)
	}
	for _, l := range a {
		if l.Measured && l.Evidence == "" {
			t.Errorf("measured advice without evidence: %+v", l)
		}
	}
}

// TestAdviseMeasures runs the short measurement: without a GPU it says so in
// one line and advises on the host side. It measures a smaller plan than
// measure.QuickPlan (9 s under -race) unless PINPOOL_SOAK is set.
func TestAdviseMeasures(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for about a second")
	}
	if os.Getenv("PINPOOL_SOAK") == "" {
		defer func(q func() measure.Plan) { quickPlan = q }(quickPlan)
		quickPlan = func() measure.Plan {
			p := measure.QuickPlan()
			p.Sizes, p.AllocSizes, p.CopySizes = []int64{4 << 10, 1 << 20}, []int64{64 << 10, 1 << 20}, []int64{1 << 20}
			p.CopyThreads, p.PoolGoroutines, p.PoolTime = []int{1, 2}, []int{1, 2}, 20*time.Millisecond
			p.MinTime, p.RotateBytes = time.Millisecond, 4<<20
			return p
		}
	}
	out, errOut, code := runCLI(t, "advise", "--json")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	var a []advise.Advice
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	topics := map[string]bool{}
	for _, l := range a {
		topics[l.Topic] = true
	}
	if !topics["pool"] || !topics["allocation"] {
		t.Errorf("topics %v", topics)
	}
	if strings.Contains(errOut, "no GPU") && strings.Count(errOut, "\n") != 1 {
		t.Errorf("want one no-GPU line on stderr:\n%s", errOut)
	}
}

func TestAdviseErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"transfers": [1, 2]}`), 0o644)
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, []byte(`{}`), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"advise", "--from", filepath.Join(dir, "missing.json")}, 1, "no such file"},
		{[]string{"advise", "--from", bad}, 1, "not a 'pinpool bench --json' report"},
		{[]string{"advise", "--from", empty}, 1, "holds no measurement"},
		{[]string{"advise", "--from", bad, "--full"}, 2, "--from and --full"},
		{[]string{"advise", "--progress", "loud"}, 2, "--progress"},
	} {
		_, errOut, code := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
