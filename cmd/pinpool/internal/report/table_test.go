package report

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// parsedTable is one table of WriteTable's output, read back.
type parsedTable struct {
	title string
	lines []string // header and rows as printed
	head  []string
	rows  [][]string
}

var cellSep = regexp.MustCompile(`\s{2,}`)

// parseTableOutput splits WriteTable's output into the header lines, the
// tables (blocks after a blank line with more than one line) and the
// skipped lines.
func parseTableOutput(t *testing.T, out string) (header []string, tables []parsedTable, skipped []string) {
	t.Helper()
	blocks := strings.Split(strings.TrimRight(out, "\n"), "\n\n")
	header = strings.Split(blocks[0], "\n")
	for _, b := range blocks[1:] {
		lines := strings.Split(b, "\n")
		if strings.HasPrefix(lines[0], "skipped: ") {
			skipped = lines
			continue
		}
		if len(lines) < 3 {
			t.Fatalf("table with no rows:\n%s", b)
		}
		pt := parsedTable{title: lines[0], lines: lines[1:]}
		for i, l := range lines[1:] {
			cells := cellSep.Split(strings.TrimSpace(l), -1)
			if i == 0 {
				pt.head = cells
			} else {
				pt.rows = append(pt.rows, cells)
			}
		}
		tables = append(tables, pt)
	}
	return header, tables, skipped
}

// cellAt returns the cell in column col of the row whose first cells are
// key, in the table whose title begins with title.
func cellAt(t *testing.T, tables []parsedTable, title string, key []string, col string) string {
	t.Helper()
	for _, tb := range tables {
		if !strings.HasPrefix(tb.title, title) {
			continue
		}
		c := slices.Index(tb.head, col)
		if c < 0 {
			t.Fatalf("table %q has no column %q: %q", tb.title, col, tb.head)
		}
		for _, row := range tb.rows {
			if len(row) != len(tb.head) {
				t.Fatalf("table %q: row %q has %d cells, header %d", tb.title, row, len(row), len(tb.head))
			}
			if slices.Equal(row[:len(key)], key) {
				return row[c]
			}
		}
		t.Fatalf("table %q has no row %q", tb.title, key)
	}
	t.Fatalf("no table titled %q…", title)
	return ""
}

type cellWant struct {
	title string
	key   []string
	col   string
	want  string
}

func TestWriteTable(t *testing.T) {
	allKinds := []string{"size", "pageable", "pinned", "write-combined", "registered", "mapped", "staged", "batch"}
	allSizes := []string{"4 KiB", "64 KiB", "1 MiB", "16 MiB", "256 MiB", "1 GiB"}
	h200Titles := []string{
		"Transfers H2D (host to device): bandwidth, GB/s (median)",
		"Transfers H2D (host to device): latency, µs (median), up to 64 KiB",
		"Transfers D2H (device to host): bandwidth, GB/s (median)",
		"Transfers D2H (device to host): latency, µs (median), up to 64 KiB",
		"Transfers both (H2D and D2H at once, GB/s summed): bandwidth, GB/s (median)",
		"Transfers both (H2D and D2H at once, GB/s summed): latency, µs (median), up to 64 KiB",
		"Allocations: time per call (median)",
		"Pool: Get+Release pairs, all goroutines (1 MiB buffers, cuMemHostAlloc backend)",
	}
	tests := []struct {
		name       string
		report     *measure.Report
		header     []string // exact header lines
		titles     []string // exact table titles, in order
		heads      map[string][]string
		rowLabels  map[string][]string // first cells of the rows of a table
		cells      []cellWant
		skipped    []string
		notContain []string
	}{
		{
			name:   "h200",
			report: h200Report(),
			header: []string{
				"date:     2026-05-04 09:30:00 UTC",
				"command:  pinpool bench --all --out results/h200",
				"gpu:      NVIDIA H200, driver 580.159.04 (CUDA 13.0), compute capability 9.0, PCIe gen5 x16",
				"cpu:      Intel(R) Xeon(R) Platinum 8480+, 16 CPUs, 128 GiB memory, linux/amd64, host h200-node-07",
			},
			titles: h200Titles,
			heads: map[string][]string{
				h200Titles[0]: allKinds,
				h200Titles[1]: allKinds,
				h200Titles[4]: allKinds,
				h200Titles[6]: {"operation", "size", "median", "min", "max", "ms/GiB", "calls"},
				h200Titles[7]: {"goroutines", "pinpool M ops/s", "pinpool ns/op", "seed M ops/s", "seed ns/op", "pinpool/seed"},
			},
			rowLabels: map[string][]string{
				h200Titles[0]: allSizes,
				h200Titles[1]: {"4 KiB", "64 KiB"},
				h200Titles[5]: {"4 KiB", "64 KiB"},
				h200Titles[7]: {"1", "2", "4", "8", "16", "32"},
			},
			cells: []cellWant{
				// 1 GiB at 7.5 µs + 1 GiB / 55.5 GB/s = 19.354 ms: 55.48 GB/s.
				{"Transfers H2D", []string{"1 GiB"}, "pinned", "55.5"},
				// 4 KiB in 7.574 µs: 0.5408 GB/s, two decimals below 10.
				{"Transfers H2D", []string{"4 KiB"}, "pinned", "0.54"},
				{"Transfers H2D", []string{"1 GiB"}, "staged", "25.5"},
				{"Transfers D2H", []string{"1 GiB"}, "pageable", "9.50"},
				{"Transfers both", []string{"256 MiB"}, "pinned", "100.8"},
				{"Transfers H2D (host to device): latency", []string{"4 KiB"}, "pinned", "7.57"},
				{"Transfers both (H2D and D2H at once, GB/s summed): latency", []string{"64 KiB"}, "staged", "33.2"},
				{"Allocations", []string{"cuMemHostAlloc", "1 GiB"}, "median", "174 ms"},
				{"Allocations", []string{"cuMemHostAlloc", "1 GiB"}, "ms/GiB", "174"},
				// 174 µs for 1 MiB is 178 ms per GiB.
				{"Allocations", []string{"cuMemHostAlloc", "1 MiB"}, "ms/GiB", "178"},
				{"Allocations", []string{"cuMemHostAlloc", "64 KiB"}, "ms/GiB", "—"},
				{"Allocations", []string{"cuMemHostAlloc", "64 KiB"}, "median", "14.6 µs"},
				{"Allocations", []string{"cuMemFreeHost", "16 MiB"}, "median", "963 µs"},
				{"Allocations", []string{"pool-hit", "4 KiB"}, "median", "42 ns"},
				{"Allocations", []string{"pool-hit", "1 GiB"}, "ms/GiB", "<0.01"},
				{"Allocations", []string{"pool-hit", "1 GiB"}, "calls", "3"},
				{"Pool", []string{"16"}, "pinpool M ops/s", "320"},
				{"Pool", []string{"16"}, "seed ns/op", "1900"},
				{"Pool", []string{"16"}, "pinpool/seed", "38.0×"},
				{"Pool", []string{"1"}, "pinpool/seed", "1.71×"},
				// 9.99999… rounds to 10.0, not 10.00.
				{"Pool", []string{"4"}, "pinpool/seed", "10.0×"},
			},
			skipped: []string{"skipped: pool: 64 goroutines: more than 2×GOMAXPROCS (16)"},
		},
		{
			name:   "no GPU",
			report: noGPUReport(),
			header: []string{
				"date:     2026-05-04 10:00:00 UTC",
				"command:  pinpool bench",
				"gpu:      none (no CUDA driver (libcuda.so.1: cannot open shared object file))",
				"cpu:      2 CPUs, 24 GiB memory, linux/arm64, host ci-runner",
			},
			titles: []string{
				"Allocations: time per call (median)",
				"Pool: Get+Release pairs, all goroutines (1 MiB buffers, host backend)",
				"Host memory copy, GB/s (the ceiling of staging: ordinary memory copied by N goroutines, no DMA running)",
			},
			rowLabels: map[string][]string{
				"Allocations: time per call (median)": {"mmap+mlock", "mmap+mlock", "mmap+mlock", "munmap", "munmap", "munmap"},
			},
			cells: []cellWant{
				{"Allocations", []string{"mmap+mlock", "1 GiB"}, "ms/GiB", "92.2"},
				{"Allocations", []string{"munmap", "4 KiB"}, "median", "1.62 µs"},
				{"Pool", []string{"2"}, "pinpool/seed", "4.36×"},
				{"Pool", []string{"1"}, "seed M ops/s", "16.7"},
				{"Host memory copy", []string{"1 MiB"}, "2 goroutines", "15.1"},
				{"Host memory copy", []string{"64 KiB"}, "1 goroutine", "4.00"},
			},
			notContain: []string{"Transfers", "skipped:", "compute capability"},
		},
		{
			name: "a cell not measured",
			report: without(h200Report(), func(t measure.Transfer) bool {
				return t.Kind == measure.Mapped && t.Dir == measure.Both && t.Size == gib
			}),
			titles: h200Titles,
			cells: []cellWant{
				{"Transfers both", []string{"1 GiB"}, "mapped", "—"},
				{"Transfers both", []string{"1 GiB"}, "pinned", "101.0"},
				{"Transfers both", []string{"256 MiB"}, "mapped", "87.9"},
				{"Transfers H2D", []string{"1 GiB"}, "mapped", "48.0"},
			},
			skipped: []string{"skipped: pool: 64 goroutines: more than 2×GOMAXPROCS (16)"},
		},
		{
			name: "two kinds, one direction, large sizes only",
			report: func() *measure.Report {
				r := without(h200Report(), func(t measure.Transfer) bool {
					return t.Dir != measure.D2H || (t.Kind != measure.Staged && t.Kind != measure.Pinned) || t.Size < mib
				})
				r.Allocs, r.Pool, r.Skipped = nil, nil, nil
				return r
			}(),
			titles: []string{"Transfers D2H (device to host): bandwidth, GB/s (median)"},
			heads: map[string][]string{
				"Transfers D2H (device to host): bandwidth, GB/s (median)": {"size", "pinned", "staged"},
			},
			rowLabels: map[string][]string{
				"Transfers D2H (device to host): bandwidth, GB/s (median)": {"1 MiB", "16 MiB", "256 MiB", "1 GiB"},
			},
			cells: []cellWant{
				{"Transfers D2H", []string{"16 MiB"}, "staged", "22.3"},
			},
			notContain: []string{"H2D", "latency", "Allocations", "Pool", "pageable"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteTable(&buf, tt.report); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			header, tables, skipped := parseTableOutput(t, out)
			if tt.header != nil && !slices.Equal(header, tt.header) {
				t.Errorf("header:\n%s\nwant:\n%s", strings.Join(header, "\n"), strings.Join(tt.header, "\n"))
			}
			var titles []string
			for _, tb := range tables {
				titles = append(titles, tb.title)
				// Every line of a table is as wide as the others: the
				// columns line up.
				w := utf8.RuneCountInString(tb.lines[0])
				for _, l := range tb.lines {
					if utf8.RuneCountInString(l) != w {
						t.Errorf("table %q: line %q is %d wide, header %d", tb.title, l, utf8.RuneCountInString(l), w)
					}
				}
				if want, ok := tt.heads[tb.title]; ok && !slices.Equal(tb.head, want) {
					t.Errorf("table %q: columns %q, want %q", tb.title, tb.head, want)
				}
				if want, ok := tt.rowLabels[tb.title]; ok {
					var got []string
					for _, r := range tb.rows {
						got = append(got, r[0])
					}
					if !slices.Equal(got, want) {
						t.Errorf("table %q: rows %q, want %q", tb.title, got, want)
					}
				}
			}
			if !slices.Equal(titles, tt.titles) {
				t.Errorf("tables:\n%s\nwant:\n%s", strings.Join(titles, "\n"), strings.Join(tt.titles, "\n"))
			}
			for _, c := range tt.cells {
				if got := cellAt(t, tables, c.title, c.key, c.col); got != c.want {
					t.Errorf("%s %q %s = %q, want %q", c.title, c.key, c.col, got, c.want)
				}
			}
			if !slices.Equal(skipped, tt.skipped) {
				t.Errorf("skipped lines %q, want %q", skipped, tt.skipped)
			}
			for _, s := range tt.notContain {
				if strings.Contains(out, s) {
					t.Errorf("output contains %q:\n%s", s, out)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

// TestFileTable checks the file benchmark's table: a row per way, warm,
// cold and the write back, and a dash for what was not measured.
func TestFileTable(t *testing.T) {
	r := &measure.Report{Files: []measure.FileRun{
		{Way: measure.FileWayPinpool, Direction: measure.H2D, Cache: "warm", Size: 4 << 30, GBps: 35.4},
		{Way: measure.FileWayPinpool, Direction: measure.H2D, Cache: "cold", Size: 4 << 30, GBps: 1.52},
		{Way: measure.FileWayPinpool, Direction: measure.D2H, Size: 4 << 30, GBps: 1.51},
		{Way: measure.FileWayPlain, Direction: measure.H2D, Cache: "warm", Size: 4 << 30, GBps: 1.6},
	}}
	var b strings.Builder
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"A 4 GiB file to the GPU and back", "pinpool", "35.4", "1.52", "1.51", "readfile+driver", "1.6"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "readfile+driver") && strings.Count(line, missing) != 2 {
			t.Errorf("row %q: want the two rows not measured as %q", line, missing)
		}
	}
}

// TestTableLineLength checks every line of the table of a report with
// everything in it (two GPUs and both at once, every direction, the file
// benchmark) against the tool's 120 characters.
func TestTableLineLength(t *testing.T) {
	r := &measure.Report{Machine: measure.Machine{GPU: "2× NVIDIA H200", Driver: "580.159.04"}}
	for _, dev := range []int{0, 1, measure.AllDevices} {
		for _, d := range measure.Directions {
			for _, k := range measure.Kinds {
				for _, n := range []int64{4 << 10, 64 << 10, 1 << 30} {
					r.Transfers = append(r.Transfers, measure.Transfer{Device: dev, Kind: k, Dir: d, Size: n, GBps: 123.4, Median: 12345678})
				}
			}
		}
	}
	r.Files = []measure.FileRun{{Way: measure.FileWayPlain, Direction: measure.H2D, Cache: "warm", Size: 16 << 30, GBps: 1.6}}
	var b strings.Builder
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(b.String()) {
		if n := utf8.RuneCountInString(strings.TrimSuffix(l, "\n")); n > 120 {
			t.Errorf("%d characters: %q", n, l)
		}
	}
}
