package report

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

func TestWriteJSONRoundTrip(t *testing.T) {
	odd := noGPUReport()
	odd.Date = time.Date(2026, 5, 4, 11, 15, 30, 123456789, time.FixedZone("CEST", 2*3600))
	odd.Command = `pinpool bench --note "<a & b>"`
	odd.Skipped = []string{"transfers: no GPU"}

	tests := []struct {
		name     string
		report   *measure.Report
		contains []string
	}{
		{"h200", h200Report(), []string{
			"{\n  \"date\": \"2026-05-04T09:30:00Z\",\n",
			`"gpu": "NVIDIA H200"`,
			`"size_bytes": 1073741824`,
			`"median_ns": 19354200`,
		}},
		{"no GPU", noGPUReport(), []string{
			`"no_gpu": "no CUDA driver`,
			`"transfers": null`,
		}},
		{"zone, HTML characters, nanoseconds", odd, []string{
			`"date": "2026-05-04T11:15:30.123456789+02:00"`,
			`"command": "pinpool bench --note \"<a & b>\""`,
		}},
		{"empty", &measure.Report{}, []string{`"allocations": null`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteJSON(&buf, tt.report); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, s := range tt.contains {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
			var back measure.Report
			if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
				t.Fatal(err)
			}
			// time.Time keeps its zone as a pointer: compare the instant
			// and the offset, then the rest.
			if !back.Date.Equal(tt.report.Date) {
				t.Errorf("date %v, want %v", back.Date, tt.report.Date)
			}
			_, off1 := back.Date.Zone()
			_, off2 := tt.report.Date.Zone()
			if off1 != off2 {
				t.Errorf("zone offset %d, want %d", off1, off2)
			}
			want := *tt.report
			back.Date, want.Date = time.Time{}, time.Time{}
			if !reflect.DeepEqual(back, want) {
				t.Errorf("round trip differs:\n got %+v\nwant %+v", back, want)
			}
		})
	}
}
