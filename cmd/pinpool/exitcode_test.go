package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExitCodes: the exit status tells the truth, command by command: 0
// measured (or showed) what was asked, 1 a failure, including a run that
// measured nothing of what was asked, 2 a usage error (130, interrupted,
// is TestInterrupt's). Before, bench --device 7 and --device all without a
// GPU, a CSV run that measured nothing (a header alone), --from with a
// second report or junk after the first, and advise --device all exited 0.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	saved := writeReport(t, gpuReport())
	b, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	twice := filepath.Join(dir, "twice.json")
	junk := filepath.Join(dir, "junk.json")
	os.WriteFile(twice, append(append(append([]byte(nil), b...), '\n'), b...), 0o644)
	os.WriteFile(junk, append(append([]byte(nil), b...), "\nnot json"...), 0o644)
	hostOnly := []string{"--progress", "never", "--no-transfers", "--no-alloc", "--goroutines", "1", "--pool-time", "5ms", "--no-host-copy"}

	type run struct {
		args     []string
		code     int
		stderr   string // in stderr
		noStdout bool   // nothing on stdout
	}
	runs := []run{
		{[]string{"info"}, 0, "", false},
		{[]string{"info", "-j"}, 0, "", false},
		{[]string{"version", "-j"}, 0, "", false},
		{[]string{"help"}, 0, "", false},
		{[]string{"help", "bench"}, 0, "", false},
		{[]string{"help", "nosuch"}, 2, "unexpected argument nosuch", true},
		{[]string{"bench", "--from", saved, "--csv"}, 0, "", false},
		{[]string{"bench", "--from", twice}, 1, "more than one report", true},
		{[]string{"bench", "--from", junk}, 1, "follows the report", true},
		{[]string{"advise", "--from", twice}, 1, "more than one report", true},
		{[]string{"advise", "--from", junk}, 1, "follows the report", true},
		{[]string{"advise", "--device", "all"}, 2, "--device all: want one device number", true},
		{[]string{"advise", "--device", "0,1"}, 2, "--device 0,1: want one device number", true},
		{[]string{"advise", "--from", saved, "--device", "1"}, 2, "--device has no use with it", true},
		{[]string{"stress", "--warmup", "-2"}, 2, "--warmup -2: want -1 or more", true},
		{[]string{"monitor", "--once", "-j"}, 0, "", false},
		{[]string{"monitor", "--interval", "-1s"}, 2, "--interval -1s: want a duration above 0s", true},
		{[]string{"bench", "--json", "--sizes", "0"}, 2, "--sizes 0: want 1 B .. 16 GiB", true},
		{[]string{"bench", "--file-dir", dir}, 2, "--file-dir " + dir + ": want --file-size too", true},
		{[]string{"bench", "--file-size", "32GiB"}, 2, "--file-size 32GiB: want 1 B .. 16 GiB", true},
		// --file-dir is checked before anything is measured (before, after
		// 35 s of other measurements).
		{[]string{"bench", "--file-size", "8MiB", "--file-dir", filepath.Join(dir, "nosuch")}, 2,
			"--file-dir " + filepath.Join(dir, "nosuch") + ": want a folder this user can write (no such file or directory)", true},
		{[]string{"bench", "--file-size", "8MiB", "--file-dir", saved}, 2, "--file-dir " + saved + ": want a folder this user can write (it is not a folder)", true},
	}
	// Runs that measure, where the lock limit lets them.
	for _, r := range []struct {
		run
		lock int64
	}{
		{run{append([]string{"bench"}, hostOnly...), 0, "", false}, lockBenchPool},
		{run{[]string{"stress", "--iterations", "2", "--goroutines", "2", "--warmup", "-1"}, 0, "", false}, lockFrame},
	} {
		if ok, why := lockable(r.lock); ok {
			runs = append(runs, r.run)
		} else {
			t.Logf("%q not run: %s", r.args, why)
		}
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "read-only")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run{[]string{"bench", "--file-size", "8MiB", "--file-dir", ro}, 2, "--file-dir " + ro + ": want a folder this user can write (permission denied)", true})
	}
	if !hasGPU() {
		runs = append(runs,
			run{[]string{"bench", "--device", "7"}, 1, "--device 7: needs a GPU, and there is none", true},
			run{[]string{"bench", "--device", "all"}, 1, "--device all: needs a GPU", true},
			run{[]string{"bench", "--csv", "--device=all", "--kinds", "pinned", "--no-alloc", "--no-pool", "--no-host-copy"}, 1, "needs a GPU", true},
			run{[]string{"bench", "--kinds", "pinned", "--no-alloc", "--no-pool", "--no-host-copy"}, 1, "--kinds pinned: needs a GPU", true},
			run{[]string{"bench", "--csv", "--sizes", "4KiB", "--no-alloc", "--no-pool", "--no-host-copy"}, 1, "measured nothing of what was asked: transfers: no GPU", true},
			run{[]string{"bench", "--plot", filepath.Join(dir, "bw.png"), "--sizes", "4KiB", "--no-alloc", "--no-pool", "--no-host-copy"}, 1, "measured nothing", true},
			run{[]string{"advise", "--device", "1"}, 1, "--device 1: needs a GPU", true},
			run{[]string{"bench", "--file-size", "8MiB", "--no-transfers", "--no-alloc", "--no-pool", "--no-host-copy"}, 1, "--file-size 8MiB: needs a GPU", true},
			run{[]string{"stress", "--device", "1", "--iterations", "1"}, 1, "--device 1: needs a GPU", true},
		)
	}
	for _, r := range runs {
		out, errOut, code := runCLI(t, r.args...)
		if code != r.code || !strings.Contains(unwrapped(errOut), r.stderr) || r.noStdout && out != "" {
			t.Errorf("%q: exit %d, stdout %d bytes, stderr:\n%s\nwant exit %d, %q in stderr, stdout empty: %v",
				r.args, code, len(out), errOut, r.code, r.stderr, r.noStdout)
		}
		if r.code == 2 && (!strings.Contains(errOut, "Usage: pinpool") || strings.Count(errOut, "pinpool:") != 1) {
			t.Errorf("%q: a usage error without the usage on stderr, or said twice:\n%s", r.args, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bw.png")); !os.IsNotExist(err) {
		t.Errorf("a plot of nothing was written: %v", err)
	}
}

// unwrapped undoes the wrapping of the tool's lines (textwrap.Width), so
// that a test can look for a phrase that a line break may cut.
func unwrapped(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestHelp: "pinpool help" and "pinpool help bench" are the --help of the
// tool and of bench; -h is --help; the tool's help documents the exit
// status and how to install it.
func TestHelp(t *testing.T) {
	top, _, code := runCLI(t, "help")
	if code != 0 || !strings.Contains(top, "Commands:") {
		t.Fatalf("help: exit %d:\n%s", code, top)
	}
	if same, _, _ := runCLI(t, "--help"); same != top {
		t.Errorf("help and --help differ:\n%s\n%s", top, same)
	}
	for _, want := range []string{"Exit status: 0", "1 failure", "2 usage error", "130", "pinpool help COMMAND"} {
		if !strings.Contains(top, want) {
			t.Errorf("--help lacks %q:\n%s", want, top)
		}
	}
	bench, _, code := runCLI(t, "help", "bench")
	if code != 0 || !strings.Contains(bench, "Usage: pinpool bench") || !strings.Contains(bench, "-j, --json") {
		t.Errorf("help bench: exit %d:\n%s", code, bench)
	}
	if h, _, _ := runCLI(t, "bench", "-h"); h != bench {
		t.Errorf("bench -h differs from help bench")
	}
}
