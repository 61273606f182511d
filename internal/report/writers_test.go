package report

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/pinpool/pinpool/internal/measure"
)

// failWriter accepts n bytes, then fails every write.
type failWriter struct{ n int }

var errDiskFull = errors.New("disk full")

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) <= f.n {
		f.n -= len(p)
		return len(p), nil
	}
	n := f.n
	f.n = 0
	return n, errDiskFull
}

func TestWritersReportErrors(t *testing.T) {
	writers := map[string]func(io.Writer, *measure.Report) error{
		"table": WriteTable, "json": WriteJSON, "csv": WriteCSV, "gobench": WriteGoBench,
	}
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			// Fail at the start and half-way: the error comes back,
			// wrapped, whatever buffering the format does.
			for _, after := range []int{0, 2000} {
				err := write(&failWriter{n: after}, h200Report())
				if !errors.Is(err, errDiskFull) || !strings.HasPrefix(err.Error(), "report: ") {
					t.Errorf("failing after %d bytes: error %v, want report: … disk full", after, err)
				}
			}
			if err := write(io.Discard, nil); err == nil || !strings.HasPrefix(err.Error(), "report: ") {
				t.Errorf("nil report: error %v", err)
			}
		})
	}
	if err := Plot("x.png", nil); err == nil || !strings.HasPrefix(err.Error(), "report: ") {
		t.Errorf("Plot nil report: error %v", err)
	}
}
