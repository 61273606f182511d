package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/pinpool/pinpool/internal/units"
)

// flagError is a flag value the tool refuses. Every such error, whichever
// check finds it (the flag's own parser, a command's Validate, kong's
// parsers of numbers and durations), is printed in one shape:
//
//	--FLAG VALUE: want WHAT
//
// with VALUE as the user typed it, so that it reads in the user's units.
type flagError struct {
	Flag  string // without the dashes; empty while a flag's parser does not know it
	Value string
	Want  string
}

// Error formats the error as "--FLAG VALUE: want WHAT".
func (e *flagError) Error() string {
	v := e.Value
	if v == "" {
		v = `""`
	}
	if e.Flag == "" {
		return fmt.Sprintf("%s: want %s", v, e.Want)
	}
	return fmt.Sprintf("--%s %s: want %s", e.Flag, v, e.Want)
}

// badValue is the error of a flag's parser (UnmarshalText), which does not
// know the flag's name: usageMessage adds it from kong's message.
func badValue(value, want string) error { return &flagError{Value: value, Want: want} }

// flagValues finds what the user typed for each flag on a command line.
type flagValues []string

// typed returns the values given for --flag, in order, each list split at
// its commas: "--sizes 4KiB,1MiB --sizes=2MiB" gives 4KiB, 1MiB, 2MiB.
func (a flagValues) typed(flag string) []string {
	var out []string
	long := "--" + flag
	for i := 0; i < len(a); i++ {
		var v string
		switch {
		case a[i] == long && i+1 < len(a):
			v = a[i+1]
			i++
		case strings.HasPrefix(a[i], long+"="):
			v = strings.TrimPrefix(a[i], long+"=")
		default:
			continue
		}
		out = append(out, strings.Split(v, ",")...)
	}
	return out
}

// value is the text the user typed for the i-th element of --flag, or
// fallback when it was not typed (a default).
func (a flagValues) value(flag string, i int, fallback string) string {
	if t := a.typed(flag); i < len(t) {
		return strings.TrimSpace(t[i])
	}
	return fallback
}

// checkInt checks an integer flag against lo .. hi.
func (a flagValues) checkInt(flag string, v, lo, hi int) error {
	if v >= lo && v <= hi {
		return nil
	}
	want := fmt.Sprintf("%d .. %d", lo, hi)
	if hi == maxFlagInt {
		want = fmt.Sprintf("%d or more", lo)
	}
	return &flagError{Flag: flag, Value: a.value(flag, 0, fmt.Sprint(v)), Want: want}
}

// checkInts checks each element of an integer list flag.
func (a flagValues) checkInts(flag string, vs []int, lo, hi int) error {
	for i, v := range vs {
		if v < lo || v > hi {
			return &flagError{Flag: flag, Value: a.value(flag, i, fmt.Sprint(v)), Want: fmt.Sprintf("%d .. %d", lo, hi)}
		}
	}
	return nil
}

// maxFlagInt is the hi of checkInt for "no upper bound".
const maxFlagInt = int(^uint(0) >> 1)

// checkSizes checks each element of a size flag against lo .. hi bytes;
// the bounds are written in binary units.
func (a flagValues) checkSizes(flag string, vs []byteSize, lo, hi int64) error {
	for i, v := range vs {
		if int64(v) < lo || int64(v) > hi {
			return &flagError{Flag: flag, Value: a.value(flag, i, v.String()), Want: units.Size(lo) + " .. " + units.Size(hi)}
		}
	}
	return nil
}

// checkDuration checks a duration flag: at least lo, or more than lo when
// strict.
func (a flagValues) checkDuration(flag string, v, lo time.Duration, strict bool) error {
	if v > lo || !strict && v == lo {
		return nil
	}
	want := fmt.Sprintf("a duration of %v or more", lo)
	if strict {
		want = fmt.Sprintf("a duration above %v, such as 500ms or 2s", lo)
	}
	return &flagError{Flag: flag, Value: a.value(flag, 0, v.String()), Want: want}
}

// checkEnum checks a lower-cased value against its choices.
func (a flagValues) checkEnum(flag, v string, choices ...string) error {
	for _, c := range choices {
		if v == c {
			return nil
		}
	}
	want := strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
	return &flagError{Flag: flag, Value: a.value(flag, 0, v), Want: want}
}

// kongValue matches kong's messages for values its own parsers refuse:
// "--repeats: expected a valid 64 bit int but got \"x\"".
var kongValue = regexp.MustCompile(`^--([a-z0-9-]+): expected (.*?) but got "(.*?)"`)

// usageMessage turns a parse or validation error into the line the tool
// prints: a flagError in its shape, whoever found it, without kong's
// prefixes (the command's name, "--flag:").
func usageMessage(err error) string {
	var fe *flagError
	if errors.As(err, &fe) {
		if fe.Flag == "" {
			// kong wrapped the parser's error as "--flag: VALUE: want ...".
			if flag, _, ok := strings.Cut(err.Error(), ": "); ok && strings.HasPrefix(flag, "--") {
				e := *fe
				e.Flag = strings.TrimPrefix(flag, "--")
				return e.Error()
			}
		}
		return fe.Error()
	}
	msg := err.Error()
	if m := kongValue.FindStringSubmatch(msg); m != nil {
		want := "a value of the flag's type (see --help)"
		switch {
		case isNegativeNumber(m[3]):
			want = "a value that is not negative"
		case strings.Contains(m[2], "int"):
			want = "a whole number"
		case strings.Contains(m[2], "float"):
			want = "a number"
		case strings.Contains(m[2], "duration"):
			want = "a duration such as 500ms, 2s or 1m"
		case strings.Contains(m[2], "bool"):
			want = "true or false"
		}
		return (&flagError{Flag: m[1], Value: m[3], Want: want}).Error()
	}
	return msg
}

// normalizeArgs rewrites a command line before kong reads it:
//   - "help [COMMAND]" becomes "[COMMAND] --help";
//   - "--flag -4KiB" becomes "--flag=-4KiB", so that a negative value
//     reaches the flag's own check instead of being read as a short flag.
func normalizeArgs(args []string) []string {
	out := append([]string(nil), args...)
	if len(out) > 0 && out[0] == "help" {
		out = append(out[1:], "--help")
	}
	for i := 0; i+1 < len(out); i++ {
		a, v := out[i], out[i+1]
		if strings.HasPrefix(a, "--") && len(a) > 2 && !strings.Contains(a, "=") && isNegativeNumber(v) {
			out[i] = a + "=" + v
			out = append(out[:i+1], out[i+2:]...)
		}
	}
	return out
}

// isNegativeNumber reports whether s starts like a negative number: "-1",
// "-4KiB", "-.5", "-1s".
func isNegativeNumber(s string) bool {
	return len(s) > 1 && s[0] == '-' && (s[1] >= '0' && s[1] <= '9' || s[1] == '.')
}

// printUsageTo prints the usage of the command that a parse error is
// about, to w (standard error: the output of a failed command is never
// mistaken for its result).
func printUsageTo(w io.Writer, err error) {
	var pe *kong.ParseError
	if !errors.As(err, &pe) || pe.Context == nil {
		return
	}
	pe.Context.Stdout = w
	_ = pe.Context.PrintUsage(true)
}
