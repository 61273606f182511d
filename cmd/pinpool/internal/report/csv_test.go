package report

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

func TestWriteCSV(t *testing.T) {
	quoted := noGPUReport()
	quoted.Allocs = append(quoted.Allocs, measure.Alloc{Op: `odd, "quoted" op`, Size: 1, Repeats: 1, Median: 1, Min: 1, Max: 1})

	header := "section,kind,direction,op,impl,size_bytes,goroutines,repeats,median_ns,min_ns,max_ns,gigabytes_per_second,ops_per_second,ns_per_op,device"
	tests := []struct {
		name   string
		report *measure.Report
		// Whole lines expected in the output.
		lines []string
	}{
		{"h200", h200Report(), []string{
			"transfer,pinned,H2D,,,4096,,1000,7574,7346,9088,0.5407974650118827,,,0",
			"alloc,,,cuMemHostAlloc,,1073741824,,3,174084000,165379800,226309200,,,,",
			"pool,,,,pinpool,1048576,16,,,,,,320000000,50,",
		}},
		{"no GPU", noGPUReport(), []string{
			"alloc,,,mmap+mlock,,4096,,50,2351,2233,3056,,,,",
			"pool,,,,seed,1048576,2,,,,,,11764706,169.99999830000002,",
		}},
		{"quoted", quoted, []string{
			`alloc,,,"odd, ""quoted"" op",,1,,1,1,1,1,,,,`,
		}},
		{"empty", &measure.Report{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteCSV(&buf, tt.report); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if lines[0] != header {
				t.Errorf("header %q, want %q", lines[0], header)
			}
			for _, l := range tt.lines {
				if !slices.Contains(lines, l) {
					t.Errorf("no line %q in:\n%s", l, out)
				}
			}

			recs, err := csv.NewReader(strings.NewReader(out)).ReadAll() // also checks every row has the header's width
			if err != nil {
				t.Fatal(err)
			}
			r := tt.report
			if want := 1 + len(r.Transfers) + len(r.Allocs) + len(r.Pool) + len(r.HostCopies); len(recs) != want {
				t.Fatalf("%d records, want %d (header + one per row)", len(recs), want)
			}
			col := map[string]int{}
			for i, h := range recs[0] {
				col[h] = i
			}
			// Each row, read back, is the report's row; cells of other
			// sections are empty.
			rows := recs[1:]
			check := func(rec []string, want map[string]string) {
				t.Helper()
				for _, h := range recs[0] {
					if got := rec[col[h]]; got != want[h] {
						t.Errorf("row %q: %s = %q, want %q", rec, h, got, want[h])
					}
				}
			}
			ns := func(d time.Duration) string { return strconv.FormatInt(int64(d), 10) }
			for i, x := range r.Transfers {
				rec := rows[i]
				gbps, err := strconv.ParseFloat(rec[col["gigabytes_per_second"]], 64)
				if err != nil || gbps != x.GBps {
					t.Errorf("row %d: gbps %q reads as %v, want %v", i, rec[col["gigabytes_per_second"]], gbps, x.GBps)
				}
				check(rec, map[string]string{
					"section": "transfer", "kind": string(x.Kind), "direction": string(x.Dir),
					"size_bytes": strconv.FormatInt(x.Size, 10), "repeats": strconv.Itoa(x.Repeats),
					"median_ns": ns(x.Median), "min_ns": ns(x.Min), "max_ns": ns(x.Max),
					"gigabytes_per_second": rec[col["gigabytes_per_second"]], "device": deviceCell(x.Device),
				})
			}
			rows = rows[len(r.Transfers):]
			for i, a := range r.Allocs {
				check(rows[i], map[string]string{
					"section": "alloc", "op": a.Op,
					"size_bytes": strconv.FormatInt(a.Size, 10), "repeats": strconv.Itoa(a.Repeats),
					"median_ns": ns(a.Median), "min_ns": ns(a.Min), "max_ns": ns(a.Max),
				})
			}
			rows = rows[len(r.Allocs):]
			for i, p := range r.Pool {
				rec := rows[i]
				ops, err1 := strconv.ParseFloat(rec[col["ops_per_second"]], 64)
				nsop, err2 := strconv.ParseFloat(rec[col["ns_per_op"]], 64)
				if err1 != nil || err2 != nil || ops != p.OpsPerSec || nsop != p.NsPerOp {
					t.Errorf("pool row %d: %q, want %v ops/s and %v ns/op", i, rec, p.OpsPerSec, p.NsPerOp)
				}
				check(rec, map[string]string{
					"section": "pool", "impl": p.Impl,
					"size_bytes": strconv.FormatInt(p.Size, 10), "goroutines": strconv.Itoa(p.Goroutines),
					"ops_per_second": rec[col["ops_per_second"]], "ns_per_op": rec[col["ns_per_op"]],
				})
			}
		})
	}
}
