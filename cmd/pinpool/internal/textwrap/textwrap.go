// Package textwrap breaks the tool's prose into lines that fit a width, so
// that no line the tool prints is longer than Width characters.
package textwrap

import (
	"strings"
	"unicode/utf8"
)

// Width is the most characters a line of the tool's text output has.
const Width = 120

// Wrap breaks s into lines of at most width characters (runes) at spaces;
// every line but the first starts with indent, which counts towards the
// width. A word longer than the room left (a long path) is broken where
// the room ends, so that no line ever exceeds width. Line breaks already
// in s are kept. A width that leaves no room after indent is raised to
// len(indent)+20.
func Wrap(s string, width int, indent string) string {
	iw := utf8.RuneCountInString(indent)
	width = max(width, iw+20)
	var b strings.Builder
	for i, para := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteString("\n")
		}
		wrapLine(&b, para, width, indent, iw)
	}
	return b.String()
}

func wrapLine(b *strings.Builder, s string, width int, indent string, iw int) {
	room := width // what is left of the current line
	for utf8.RuneCountInString(s) > room {
		cut := lastSpaceWithin(s, room)
		var line string
		if cut <= 0 {
			line, s = splitRunes(s, room) // no space to break at: break the word
		} else {
			line, s = s[:cut], strings.TrimLeft(s[cut:], " ")
		}
		b.WriteString(strings.TrimRight(line, " "))
		b.WriteString("\n")
		b.WriteString(indent)
		room = width - iw
	}
	b.WriteString(s)
}

// lastSpaceWithin returns the byte index of the last space such that the
// text before it has at most n runes, or -1.
func lastSpaceWithin(s string, n int) int {
	last, runes := -1, 0
	for i, r := range s {
		if runes > n {
			break
		}
		if r == ' ' {
			last = i
		}
		runes++
	}
	return last
}

// splitRunes splits s after n runes.
func splitRunes(s string, n int) (string, string) {
	i := 0
	for k := range s {
		if i == n {
			return s[:k], s[k:]
		}
		i++
	}
	return s, ""
}
