package hostmem

import (
	"fmt"
	"strings"
	"testing"
)

const sampleStatus = `Name:	hostmem.test
Umask:	0022
State:	R (running)
VmPeak:	 1234568 kB
VmLck:	   65536 kB
VmPin:	       0 kB
VmLckExtra:	9 kB
Threads:	7
`

func TestParseStatusKB(t *testing.T) {
	tests := []struct {
		name, in, key string
		want          uint64
		found, err    bool
	}{
		{"VmLck", sampleStatus, "VmLck", 65536, true, false},
		{"VmPin zero", sampleStatus, "VmPin", 0, true, false},
		{"first line", sampleStatus, "Name", 0, true, true},
		{"no unit", sampleStatus, "Threads", 7, true, false},
		{"missing", sampleStatus, "VmSwap", 0, false, false},
		{"prefix of longer key", "VmLckExtra:\t9 kB\n", "VmLck", 0, false, false},
		{"no trailing newline", "VmLck:\t12 kB", "VmLck", 12, true, false},
		{"empty input", "", "VmLck", 0, false, false},
		{"empty key", sampleStatus, "", 0, false, false},
		{"no value", "VmLck:\n", "VmLck", 0, true, true},
		{"bad unit", "VmLck:\t12 MB\n", "VmLck", 0, true, true},
		{"negative", "VmLck:\t-12 kB\n", "VmLck", 0, true, true},
		{"overflow", "VmLck:\t18446744073709551616 kB\n", "VmLck", 0, true, true},
		{"max", "VmLck:\t18446744073709551615 kB\n", "VmLck", 1<<64 - 1, true, false},
		{"meminfo", "MemTotal:       24684136 kB\nMemAvailable:   24442972 kB\n", "MemAvailable", 24442972, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found, err := parseStatusKB(strings.NewReader(tt.in), tt.key)
			if (err != nil) != tt.err || found != tt.found || (err == nil && got != tt.want) {
				t.Fatalf("parseStatusKB(%q) = %d, %v, %v; want %d, %v, error %v", tt.key, got, found, err, tt.want, tt.found, tt.err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "hostmem: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
		})
	}
}

func FuzzParseStatusKB(f *testing.F) {
	f.Add(sampleStatus, "VmLck", uint64(3))
	f.Add("VmLck:\t12 kB", "VmLck", uint64(0))
	f.Add("\n\n:", "", uint64(1<<63))
	f.Fuzz(func(t *testing.T, text, key string, v uint64) {
		// Arbitrary input: no panic, and a found value is reported consistently.
		got, found, err := parseStatusKB(strings.NewReader(text), key)
		if err != nil && !found && !strings.HasPrefix(err.Error(), "hostmem: ") {
			t.Fatalf("unexpected error %v", err)
		}
		if !found && got != 0 {
			t.Fatalf("not found but value %d", got)
		}
		// A well-formed line for a sane key, appended after arbitrary text
		// that does not contain the key, must be found with its value.
		if key == "" || strings.ContainsAny(key, ":\n") || strings.Contains(text, key+":") {
			return
		}
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		in := text + fmt.Sprintf("%s:\t%d kB\n", key, v)
		got, found, err = parseStatusKB(strings.NewReader(in), key)
		if err != nil || !found || got != v {
			t.Fatalf("parseStatusKB(%q, %q) = %d, %v, %v; want %d", in, key, got, found, err, v)
		}
	})
}
