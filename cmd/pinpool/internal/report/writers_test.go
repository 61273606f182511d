package report

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
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

// twoDevices is h200Report measured on two devices, with the pinned rows
// also measured on both at once.
func twoDevices() *measure.Report {
	r := h200Report()
	var more []measure.Transfer
	for _, t := range r.Transfers {
		t1 := t
		t1.Device = 1
		more = append(more, t1)
		if t.Kind == measure.Pinned && t.Dir != measure.Both {
			all := t
			all.Device = measure.AllDevices
			all.GBps = 2 * t.GBps
			more = append(more, all)
		}
	}
	r.Transfers = append(r.Transfers, more...)
	return r
}

// TestSeveralDevices: each device's transfers, and those of all devices at
// once, are told apart in every writer.
func TestSeveralDevices(t *testing.T) {
	r := twoDevices()
	var table, csvOut, gob bytes.Buffer
	for _, w := range []func() error{
		func() error { return WriteTable(&table, r) },
		func() error { return WriteCSV(&csvOut, r) },
		func() error { return WriteGoBench(&gob, r) },
	} {
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ what, out, want string }{
		{"table", table.String(), "device 0: Transfers H2D"},
		{"table", table.String(), "device 1: Transfers D2H"},
		{"table", table.String(), "2 devices at once (bytes summed): Transfers H2D"},
		{"csv", csvOut.String(), ",all\n"},
		{"gobench", gob.String(), "BenchmarkTransfer/device=all/kind=pinned/dir=H2D/size=4KiB"},
		{"gobench", gob.String(), "BenchmarkTransfer/device=1/kind=pageable"},
	} {
		if !strings.Contains(c.out, c.want) {
			t.Errorf("%s lacks %q", c.what, c.want)
		}
	}
	if strings.Contains(table.String(), "2 devices at once (bytes summed): Transfers both") {
		t.Error("a both table for all devices at once, which is not measured")
	}
}
