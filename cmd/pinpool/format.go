package main

import (
	"strings"
	"unicode/utf8"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/textwrap"
)

// yesNo renders a boolean for tables.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// wrapAligned breaks the lines of text (key, then value aligned by a
// tabwriter) that are longer than textwrap.Width, continuing each under
// its value's column: the first run of two or more spaces after a colon
// ends the key; a line without one continues under its own indent plus
// two.
func wrapAligned(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if utf8.RuneCountInString(l) <= textwrap.Width {
			continue
		}
		col := len(l) - len(strings.TrimLeft(l, " ")) + 2
		if k := strings.Index(l, ":  "); k >= 0 {
			j := k + 1
			for j < len(l) && l[j] == ' ' {
				j++
			}
			col = utf8.RuneCountInString(l[:j])
		}
		lines[i] = textwrap.Wrap(l, textwrap.Width, strings.Repeat(" ", col))
	}
	return strings.Join(lines, "\n")
}
