package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestInterrupt: one rule for every command on Ctrl-C (SIGINT, SIGTERM):
// stop the work, print what was measured, marked partial, and exit 130;
// when nothing was measured, print nothing and say so. Before, bench
// printed and exited 1, stress printed nothing (or, stopped in its
// warm-up, a row of zeros), advise said "what was measured is above" above
// nothing, --json had no field saying the results were partial, and bench
// --copy-sizes 1GiB took 7 s to stop (its setup did not look at the
// signal).
func TestInterrupt(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		after   time.Duration
		want    string // in stdout: something measured, marked partial; "" for nothing
		wantErr string // in stderr
		ends    bool   // the interrupt is the command's normal end: exit 0, nothing said
	}{
		{"bench", append(append([]string(nil), smallBench...), "--pool-time", "300ms", "--goroutines", "1,2,2,1"),
			150 * time.Millisecond, "partial: the run stopped early", "the results above are partial", false},
		{"bench json", append(append([]string(nil), smallBench...), "--pool-time", "300ms", "--goroutines", "1,2,2,1", "--json"),
			150 * time.Millisecond, `"partial": true`, "the results above are partial", false},
		{"bench host-copy setup", []string{"bench", "--no-transfers", "--no-alloc", "--no-pool", "--copy-sizes", "1GiB,1GiB"},
			300 * time.Millisecond, "", "interrupted before anything was measured", false},
		{"stress", []string{"stress", "--iterations", "100000", "--sleep-scale", "1", "--warmup", "0", "--compare-seed"},
			150 * time.Millisecond, "partial: interrupted", "the results above are partial", false},
		{"stress json", []string{"stress", "--iterations", "100000", "--sleep-scale", "1", "--warmup", "0", "-j"},
			150 * time.Millisecond, `"partial": true`, "the results above are partial", false},
		{"stress in warm-up", []string{"stress", "--iterations", "100000", "--sleep-scale", "1", "--compare-seed"},
			150 * time.Millisecond, "", "interrupted before anything was measured", false},
		{"advise", []string{"advise", "--progress", "never"},
			150 * time.Millisecond, "", "no advice", false},
		// Run until interrupted, monitor ends on Ctrl-C (before, it exited
		// 130 and called its samples partial); asked for a count, it is
		// cut short.
		{"monitor", []string{"monitor", "--interval", "40ms", "--json"}, 150 * time.Millisecond, "{", "", true},
		{"monitor count", []string{"monitor", "--interval", "40ms", "--count", "1000"}, 150 * time.Millisecond, "MemAvailable", "the results above are partial", false},
	}
	// What each case locks on the host backend (the stress cases a
	// default frame each; the bench cases' pools take half of what is
	// left of RLIMIT_MEMLOCK each, so that two at once under 8 MiB left the
	// later one nothing to lock: it skipped its pool and ended, exit 0,
	// before the interrupt came).
	lock := map[string]int64{"stress": lockFrame, "stress json": lockFrame, "stress in warm-up": lockFrame, "advise": lockBenchPool,
		"bench": lockBenchPool, "bench json": lockBenchPool}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			needLockable(t, lock[tt.name])
			// The cases that lock memory run one at a time, so that under a
			// small RLIMIT_MEMLOCK one of them does not find the others'
			// frames holding the allowance that needLockable saw free.
			if lock[tt.name] == 0 {
				t.Parallel()
			}
			var out, errOut bytes.Buffer
			// A loaded machine may measure nothing before the interrupt:
			// that outcome has its own rule (print nothing, say so), checked
			// here, and the command runs again with twice the time, until
			// something is measured where the case expects it.
			for after := tt.after; ; after *= 2 {
				out.Reset()
				errOut.Reset()
				ctx, cancel := context.WithCancel(context.Background())
				var interrupted time.Time
				timer := time.AfterFunc(after, func() { interrupted = time.Now(); cancel() })
				code := runContext(ctx, tt.args, &out, &errOut)
				stopped := time.Now()
				timer.Stop()
				cancel()
				if want := map[bool]int{false: exitInterrupted, true: 0}[tt.ends]; code != want {
					t.Fatalf("exit %d, want %d; stderr:\n%s", code, want, errOut.String())
				}
				if tt.ends && errOut.Len() > 0 && !strings.Contains(errOut.String(), "no GPU") {
					t.Fatalf("stderr after the end it was made for:\n%s", errOut.String())
				}
				if d := stopped.Sub(interrupted); d > 5*time.Second {
					t.Errorf("took %v to stop after the interrupt", d)
				}
				nothing := strings.Contains(errOut.String(), "interrupted before anything was measured")
				if nothing && out.Len() > 0 {
					t.Errorf("printed results of nothing measured:\n%s", out.String())
				}
				if tt.want == "" || !nothing || after >= 8*time.Second {
					break
				}
				t.Logf("nothing measured in %v; again with twice the time", after)
			}
			if tt.want == "" && out.Len() > 0 {
				t.Errorf("printed results of nothing measured:\n%s", out.String())
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("stdout lacks %q:\n%s", tt.want, out.String())
			}
			if !strings.Contains(errOut.String(), tt.wantErr) || strings.Contains(errOut.String(), "what was measured is above") {
				t.Errorf("stderr lacks %q:\n%s", tt.wantErr, errOut.String())
			}
			if strings.Contains(tt.want, "partial") && strings.HasPrefix(tt.want, `"`) {
				var v struct{ Partial bool }
				if err := json.Unmarshal(out.Bytes(), &v); err != nil || !v.Partial {
					t.Errorf("JSON not marked partial (%v):\n%s", err, out.String())
				}
			}
		})
	}
}
