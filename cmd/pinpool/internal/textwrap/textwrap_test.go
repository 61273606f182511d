package textwrap

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestWrap(t *testing.T) {
	long := strings.Repeat("word ", 60) + strings.Repeat("x", 300) + " tail µs ×"
	for _, width := range []int{30, 80, 120} {
		for _, indent := range []string{"", "      "} {
			got := Wrap(long, width, indent)
			if strings.Join(strings.Fields(got), "") != strings.Join(strings.Fields(long), "") {
				t.Fatalf("width %d: the words changed:\n%s", width, got)
			}
			for i, l := range strings.Split(got, "\n") {
				if n := utf8.RuneCountInString(l); n > width {
					t.Errorf("width %d line %d has %d characters: %q", width, i, n, l)
				}
				if i > 0 && !strings.HasPrefix(l, indent) {
					t.Errorf("line %d lacks the indent: %q", i, l)
				}
			}
		}
	}
	if got := Wrap("short\nlines stay", 120, "  "); got != "short\nlines stay" {
		t.Errorf("short text changed: %q", got)
	}
	if got := Wrap("aaa bbb ccc", 3, ""); strings.Count(got, "\n") != 0 {
		// width is raised to 20 when it leaves no room
		t.Errorf("tiny width: %q", got)
	}
}
