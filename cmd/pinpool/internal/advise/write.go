package advise

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/textwrap"
)

// notMeasured marks the advice column of a line whose data was missing.
const notMeasured = "[not measured] "

// Write prints advice as aligned text: the topic in a column as wide as the
// longest topic, the advice beside it, and the evidence on the next line,
// indented under the advice; lines longer than textwrap.Width continue,
// indented, on the next. Lines whose data was missing are marked
// "[not measured]".
func Write(w io.Writer, advice []Advice) error {
	width := 0
	for _, a := range advice {
		width = max(width, utf8.RuneCountInString(a.Topic))
	}
	indent := strings.Repeat(" ", width+2)
	var b bytes.Buffer
	for _, a := range advice {
		line := a.Topic + strings.Repeat(" ", width+2-utf8.RuneCountInString(a.Topic))
		if !a.Measured {
			line += notMeasured
		}
		b.WriteString(textwrap.Wrap(line+oneLine(a.Advice), textwrap.Width, indent))
		b.WriteByte('\n')
		if a.Evidence != "" {
			b.WriteString(textwrap.Wrap(indent+oneLine(a.Evidence), textwrap.Width, indent))
			b.WriteByte('\n')
		}
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("advise: write: %w", err)
	}
	return nil
}

// oneLine replaces line breaks, which would break the alignment, with
// spaces.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// WriteJSON writes advice as an indented JSON array of objects with the
// fields topic, advice, evidence and measured; no advice is an empty
// array.
func WriteJSON(w io.Writer, advice []Advice) error {
	if advice == nil {
		advice = []Advice{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // "DirectBelow: 2 << 20" stays readable
	if err := enc.Encode(advice); err != nil {
		return fmt.Errorf("advise: encode JSON: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("advise: write JSON: %w", err)
	}
	return nil
}
