package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrorsSpeakTheUsersUnits: every usage error names the flag,
// says what it wants in the units the user reads, exits 2 before
// measuring anything, and says "pinpool:" once. Before: sizes answered in
// bytes from an internal package ("measure: invalid plan: transfer size
// 0: want 1 .. 17179869184 bytes"), a negative size got the flag parser's
// "expected value value", and contradictions were measured anyway.
func TestUsageErrorsSpeakTheUsersUnits(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-dir", "bw.png")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--max-size", "0"}, "--max-size 0: want 1 B .. 16 GiB"},
		{[]string{"bench", "--sizes", "20GiB"}, "--sizes 20GiB: want 1 B .. 16 GiB"},
		{[]string{"bench", "--sizes", "-4KiB"}, "--sizes -4KiB: want a byte count such as 3110400"},
		{[]string{"bench", "--alloc-sizes", "32GiB"}, "--alloc-sizes 32GiB: want 1 B .. 16 GiB"},
		{[]string{"bench", "--pool-size", "2GiB"}, "--pool-size 2GiB: want 1 B .. 1 GiB"},
		{[]string{"bench", "--no-transfers", "--no-alloc", "--no-pool", "--no-host-copy"}, "leave nothing to measure"},
		{[]string{"bench", "--sizes", "4KiB", "--max-size", "1MiB"}, "--sizes and --max-size both choose"},
		{[]string{"bench", "--from", "saved.json", "--sizes", "4KiB"}, "--from saved.json renders a saved report and measures nothing: --sizes"},
		{[]string{"bench", "--plot", missing}, "--plot " + missing + ": want a file in a folder this user can write"},
		{[]string{"bench", "--kinds", "paged"}, "--kinds paged: want one of pageable, pinned"},
		{[]string{"bench", "--kinds", "batched"}, "mapped, staged, batch"},
		{[]string{"bench", "--progress", "sometimes"}, "--progress sometimes: want auto, always or never"},
		{[]string{"stress", "--size", "64TiB"}, "--size 64TiB: want at most this machine's memory"},
		{[]string{"stress", "--budget", "1MiB"}, "--budget 1MiB: want 0 (none) or at least one buffer"},
	}
	for _, tt := range tests {
		out, errOut, code := runCLI(t, tt.args...)
		if code != 2 || !strings.Contains(unwrapped(errOut), tt.want) || strings.Count(errOut, "pinpool:") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q, said once", tt.args, code, errOut, tt.want)
		}
		if strings.Contains(out, "date:") || strings.Contains(errOut, "measure:") || strings.Contains(errOut, "seedpool") {
			t.Errorf("%q measured, or named an internal package:\n%s\n%s", tt.args, out, errOut)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the unwritable plot path exists: %v", err)
	}
}

// TestEnumFlagsIgnoreCase: every enumerated flag takes the same case
// rules, as --directions always did.
func TestEnumFlagsIgnoreCase(t *testing.T) {
	needLockable(t, lockBenchPool)
	for _, args := range [][]string{
		{"--progress", "NEVER"}, {"--kinds", "Pinned,STAGED"}, {"--kinds", "Batch"}, {"--directions", "h2d,BOTH"},
	} {
		full := append([]string{"bench", "--no-transfers", "--no-alloc", "--no-host-copy", "--goroutines", "1", "--pool-time", "5ms"}, args...)
		if _, errOut, code := runCLI(t, full...); code != 0 {
			t.Errorf("%q: exit %d: %s", args, code, errOut)
		}
	}
}
