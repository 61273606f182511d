package report

import (
	"bytes"
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

// TestHostCopyRows: every writer carries the host copy rows.
func TestHostCopyRows(t *testing.T) {
	r := noGPUReport()
	var table, csvOut, gob bytes.Buffer
	if err := WriteTable(&table, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteCSV(&csvOut, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteGoBench(&gob, r); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, out, want string }{
		{"table", table.String(), "Host memory copy, GB/s"},
		{"table", table.String(), "2 goroutines"},
		{"csv", csvOut.String(), "hostcopy,,,,,1048576,2,10,"},
		{"gobench", gob.String(), "BenchmarkHostCopy/size=1MiB/threads=2"},
	} {
		if !strings.Contains(c.out, c.want) {
			t.Errorf("%s lacks %q:\n%s", c.what, c.want, c.out)
		}
	}
	if n := strings.Count(csvOut.String(), "\nhostcopy,"); n != len(r.HostCopies) {
		t.Errorf("csv has %d hostcopy rows, want %d", n, len(r.HostCopies))
	}
}
