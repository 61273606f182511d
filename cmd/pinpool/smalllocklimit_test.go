package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestToolUnderSmallLockLimits runs the tool under lock limits from the
// default 8 MiB down to none at all (ulimit -l 0), each in a child as
// runUnderLockLimit makes it. stress --reserve reserves what fits and says
// so in one line (before: "pinpool: --reserve: pinpool: budget
// exhausted ...", exit 1); a limit below one frame is a one-line error
// before anything runs (before: "holds 1 of the 10 goroutines' frames",
// then 2000 failed gets); 0 shows as 0, never as "1 B" or "(1 bytes)"; and
// no line of any command is longer than textwrap.Width (before: stress's
// note was 124 characters, bench's error at 0 one line of 516).
func TestToolUnderSmallLockLimits(t *testing.T) {
	if limit, ok := lockLimitOfChild(t); ok {
		smallLockLimitChild(t, limit)
		return
	}
	for _, limit := range []uint64{8 << 20, 2 << 20, 64 << 10, 0} {
		t.Run(strconv.FormatUint(limit, 10), func(t *testing.T) {
			runUnderLockLimit(t, "TestToolUnderSmallLockLimits", limit)
		})
	}
}

func smallLockLimitChild(t *testing.T, limit uint64) {
	const frame = 3112960 // the default --size, 3110400, in whole pages
	out, errOut, code := runCLI(t, "stress", "--goroutines", "4", "--iterations", "5", "--sleep-scale", "0", "--warmup", "0", "--reserve", "--json")
	notes := noteLines(errOut)
	if limit >= frame {
		var rep stressReport
		if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
			t.Fatalf("stress --reserve: exit %d, %v\n%s\n%s", code, err, errOut, out)
		}
		fits := int(limit / frame)
		if res := rep.Results[0]; rep.Workload.Reserved != fits || res.Failures != 0 || *res.Misses != 0 {
			t.Errorf("stress --reserve under %d bytes: reserved %d (want %d), %+v", limit, rep.Workload.Reserved, fits, res)
		}
		if len(notes) != 1 || !strings.Contains(notes[0], "--reserve keeps "+strconv.Itoa(fits)) || strings.Contains(errOut, "\n ") {
			t.Errorf("stress --reserve should say in one line what it keeps: %q", notes)
		}
	} else {
		if code != 1 || out != "" || len(notes) != 1 || !strings.HasPrefix(notes[0], "pinpool: RLIMIT_MEMLOCK (") ||
			!strings.Contains(notes[0], "holds no frame") || strings.Count(notes[0], "pinpool:") != 1 {
			t.Errorf("stress under a limit below one frame: exit %d, want 1 and one line; stdout %q, stderr:\n%s", code, out, errOut)
		}
		if limit == 0 && !strings.Contains(notes[0], "0 B: locking not allowed") {
			t.Errorf("stress under ulimit -l 0: %q", notes[0])
		}
	}

	runs := append(lineLengthRuns(t), []string{"stress", "--iterations", "3", "--sleep-scale", "0"},
		[]string{"bench", "--progress", "never", "--no-transfers", "--no-alloc", "--goroutines", "1", "--pool-time", "5ms", "--no-host-copy"})
	for _, args := range runs {
		out, errOut, _ := runCLI(t, args...)
		what := strings.Join(args, " ")
		checkLineLengths(t, what+" (stdout)", out)
		checkLineLengths(t, what+" (stderr)", errOut)
		for _, bad := range []string{"pinpool: pinpool:", ": pinpool: "} {
			if strings.Contains(errOut, bad) {
				t.Errorf("%s: prefixes stack (%q):\n%s", what, bad, errOut)
			}
		}
		if limit == 0 {
			for _, bad := range []string{"(1 B", " 1 B,", " 1 B;", "soft 1 B", "(1 bytes)", "of 1 bytes"} {
				if strings.Contains(out+errOut, bad) {
					t.Errorf("%s under ulimit -l 0 shows the limit as 1 byte (%q):\n%s\n%s", what, bad, out, errOut)
				}
			}
		}
	}
	t.Log("child: ok")
}

// noteLines returns the lines of stderr that are not the no-GPU note,
// with the indented lines a long one wraps onto joined to it.
func noteLines(stderr string) []string {
	var lines []string
	for l := range strings.Lines(stderr) {
		l = strings.TrimSuffix(l, "\n")
		switch {
		case strings.HasPrefix(l, "host backend: no GPU"):
		case strings.HasPrefix(l, " ") && len(lines) > 0:
			lines[len(lines)-1] += " " + strings.TrimLeft(l, " ")
		default:
			lines = append(lines, l)
		}
	}
	return lines
}

// TestErrorText: the tool's error line says "pinpool: " once, however the
// message was wrapped, and no line of it is longer than textwrap.Width.
func TestErrorText(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"bench: no GPU", "pinpool: bench: no GPU"},
		{"pinpool: budget exhausted", "pinpool: budget exhausted"},
		{"--reserve: pinpool: budget exhausted", "pinpool: --reserve: budget exhausted"},
		{"a: pinpool: b: pinpool: c", "pinpool: a: b: c"},
	} {
		if got := errorText(tc.msg); got != tc.want {
			t.Errorf("errorText(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
	long := errorText("measure: " + strings.Repeat("a long reason, ", 40))
	checkLineLengths(t, "a long error", long)
	if strings.Count(long, "\n") < 4 || !strings.HasPrefix(strings.Split(long, "\n")[1], "  ") {
		t.Errorf("a long error is not wrapped with indented lines:\n%s", long)
	}
}
