package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestInterrupt: one rule for every command on Ctrl-C (SIGINT, SIGTERM):
// stop the work, print what was measured, exit 130. Before, bench printed
// and exited 1, and stress printed nothing and exited 130.
func TestInterrupt(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		after time.Duration
		want  string // in stdout: something measured
	}{
		{"bench", append(append([]string(nil), smallBench...), "--pool-time", "300ms", "--goroutines", "1,2,2,1"), 150 * time.Millisecond, "date:"},
		{"stress", []string{"stress", "--iterations", "100000", "--sleep-scale", "1", "--compare-seed"}, 150 * time.Millisecond, "pinpool"},
		{"monitor", []string{"monitor", "--interval", "40ms", "--json"}, 150 * time.Millisecond, "{"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(tt.after, cancel)
			var out, errOut bytes.Buffer
			t0 := time.Now()
			code := runContext(ctx, tt.args, &out, &errOut)
			if code != exitInterrupted {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitInterrupted, errOut.String())
			}
			if d := time.Since(t0); d > 5*time.Second {
				t.Errorf("took %v to stop after the interrupt", d)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("printed nothing measured (want %q); stdout:\n%s", tt.want, out.String())
			}
			if !strings.Contains(errOut.String(), "interrupted") {
				t.Errorf("stderr does not say it was interrupted:\n%s", errOut.String())
			}
		})
	}
}
