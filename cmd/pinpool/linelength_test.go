package main

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/textwrap"
)

// checkLineLengths fails for every line of text longer than
// textwrap.Width characters.
func checkLineLengths(t *testing.T, what, text string) {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(l); n > textwrap.Width {
			t.Errorf("%s: line %d has %d characters (at most %d): %q", what, i+1, n, textwrap.Width, l)
		}
	}
}

// TestLineLengths runs every command, its help, and some of its errors,
// and checks that no line it prints, on stdout or stderr, is longer than
// textwrap.Width (120) characters. Before, bench, stress, info, advise and
// monitor printed lines of 187 to 253 characters.
func TestLineLengths(t *testing.T) {
	for _, args := range lineLengthRuns(t) {
		out, errOut, _ := runCLI(t, args...)
		checkLineLengths(t, strings.Join(args, " ")+" (stdout)", out)
		checkLineLengths(t, strings.Join(args, " ")+" (stderr)", errOut)
	}
}

// lineLengthRuns are the command lines TestLineLengths runs: every
// command, its help, and some of its errors.
func lineLengthRuns(t *testing.T) [][]string {
	saved := writeReport(t, gpuReport())
	runs := [][]string{
		{"--help"}, {"help"}, {"info"}, {"version"},
		append(append([]string(nil), smallBench...), "--plot", filepath.Join(t.TempDir(), "bw.svg")),
		{"bench", "--from", saved}, {"bench", "--from", saved, "--plot", filepath.Join(t.TempDir(), "gpu.svg")},
		{"advise", "--from", saved},
		{"stress", "--goroutines", "3", "--iterations", "5", "--sleep-scale", "0", "--compare-seed", "--compare-raw", "--budget", "64MiB"},
		{"monitor", "--once", "--pid", "1"},
		{"bench", "--sizes", "0"}, {"bench", "--device", "all,1"}, {"stress", "--budget", "1MiB"},
		{"monitor", "--interval", "0"}, {"bench", "--no-such-flag"},
	}
	for _, cmd := range []string{"info", "bench", "advise", "stress", "monitor", "version"} {
		runs = append(runs, []string{"help", cmd}, []string{cmd, "-h"})
	}
	return runs
}
