package report

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// WriteJSON writes r as indented JSON, in the field names of the
// measure types' json tags (durations in nanoseconds, sizes in bytes).
// The output unmarshals back into an equal measure.Report. HTML
// characters are not escaped.
func WriteJSON(w io.Writer, r *measure.Report) error {
	if r == nil {
		return fmt.Errorf("report: nil report")
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("report: writing JSON: %w", err)
	}
	return nil
}
