package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
	"github.com/pinpool/pinpool/cmd/pinpool/internal/textwrap"
)

// missing is the cell of a table for something not measured.
const missing = "—"

// latencyMaxSize is the largest transfer size the latency tables list.
const latencyMaxSize = 64 << 10

// WriteTable writes r as aligned tables for a terminal: a header naming
// the date, the command and the machine; per direction, the transfer
// bandwidth in GB/s (sizes down, memory kinds across) and the median
// latency in µs of the transfers of at most 64 KiB; the cost of the
// allocation operations; the pool's throughput against the seed design;
// the host memory copy bandwidth (the ceiling of staging); and what was
// skipped. Sections with nothing in them are left out.
func WriteTable(w io.Writer, r *measure.Report) error {
	if r == nil {
		return fmt.Errorf("report: nil report")
	}
	ew := &errWriter{w: w}
	writeHeader(ew, r)
	var tables []table
	tables = append(tables, transferTables(r)...)
	tables = append(tables, allocTables(r)...)
	tables = append(tables, poolTables(r)...)
	tables = append(tables, hostCopyTables(r)...)
	tables = append(tables, fileTables(r)...)
	for _, t := range tables {
		fmt.Fprintln(ew)
		t.write(ew)
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintln(ew)
		for _, s := range r.Skipped {
			fmt.Fprintln(ew, textwrap.Wrap("skipped: "+oneLine(s), textwrap.Width, "         "))
		}
	}
	if r.Partial {
		fmt.Fprintln(ew)
		fmt.Fprintln(ew, "partial: the run stopped early; the rows above are those measured before it stopped")
	}
	if ew.err != nil {
		return fmt.Errorf("report: writing table: %w", ew.err)
	}
	return nil
}

// errWriter keeps the first error of the writes to w and drops the
// writes after it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// writeHeader writes the date, the command and the machine.
func writeHeader(w io.Writer, r *measure.Report) {
	m := r.Machine
	date := "unknown"
	if !r.Date.IsZero() {
		date = r.Date.Format("2006-01-02 15:04:05 MST")
	}
	fmt.Fprintf(w, "date:     %s\n", date)
	if r.Command != "" {
		fmt.Fprintln(w, textwrap.Wrap("command:  "+oneLine(r.Command), textwrap.Width, "          "))
	}

	var gpu []string
	switch {
	case m.NoGPU != "":
		gpu = append(gpu, "none ("+m.NoGPU+")")
	case m.GPU != "":
		gpu = append(gpu, m.GPU)
		if d := driverLabel(m); d != "" {
			gpu = append(gpu, d)
		}
		if m.ComputeCapability != "" {
			gpu = append(gpu, "compute capability "+m.ComputeCapability)
		}
		if m.PCIe != "" {
			gpu = append(gpu, "PCIe "+m.PCIe)
		}
		if m.Integrated {
			gpu = append(gpu, "integrated")
		}
		if !m.CanMapHostMemory {
			gpu = append(gpu, "cannot map host memory")
		}
	}
	if len(gpu) > 0 {
		fmt.Fprintln(w, textwrap.Wrap("gpu:      "+oneLine(strings.Join(gpu, ", ")), textwrap.Width, "          "))
	}

	var cpu []string
	if m.CPUModel != "" {
		cpu = append(cpu, m.CPUModel)
	}
	if m.CPUs > 0 {
		cpu = append(cpu, fmt.Sprintf("%d CPUs", m.CPUs))
	}
	if m.MemTotal > 0 {
		cpu = append(cpu, formatMemory(m.MemTotal)+" memory")
	}
	if m.GOOS != "" || m.GOARCH != "" {
		cpu = append(cpu, m.GOOS+"/"+m.GOARCH)
	}
	if m.Hostname != "" {
		cpu = append(cpu, "host "+m.Hostname)
	}
	if len(cpu) > 0 {
		fmt.Fprintln(w, textwrap.Wrap("cpu:      "+oneLine(strings.Join(cpu, ", ")), textwrap.Width, "          "))
	}
}

// formatMemory writes a machine's memory size to a tenth of a GiB
// ("125.7 GiB"), or exactly when below a GiB or a whole number of GiB.
func formatMemory(n int64) string {
	if n < 1<<30 || n%(1<<30) == 0 {
		return formatSize(n)
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// oneLine replaces the line breaks and tabs of s with spaces, so that a
// value cannot break a table or a line-based format.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', '\t', '\v', '\f':
			return ' '
		}
		return r
	}, s)
}

// table is one titled table: a header row and rows of cells. The first
// column is aligned left, the others right.
type table struct {
	title string
	head  []string
	rows  [][]string
}

func (t table) write(w io.Writer) {
	fmt.Fprintln(w, t.title)
	// The first column is padded here so that it reads left-aligned in a
	// tabwriter that aligns every cell right.
	first := 0
	for _, row := range append([][]string{t.head}, t.rows...) {
		first = max(first, utf8.RuneCountInString(row[0]))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, row := range append([][]string{t.head}, t.rows...) {
		cells := slices.Clone(row)
		cells[0] += strings.Repeat(" ", first-utf8.RuneCountInString(cells[0]))
		for i, c := range cells {
			cells[i] = oneLine(c)
		}
		fmt.Fprint(tw, strings.Join(cells, "\t")+"\t\n")
	}
	tw.Flush()
}

// transferTables returns, per direction present, the bandwidth table and
// (when there are small transfers) the latency table.
func transferTables(r *measure.Report) []table {
	groups := deviceGroups(r)
	if len(groups) == 1 {
		return transferTablesOf(r.Transfers, "")
	}
	var out []table
	for _, g := range groups {
		out = append(out, transferTablesOf(g.rows, g.name+": ")...)
	}
	return out
}

// deviceGroup is the transfers of one device, or of all at once.
type deviceGroup struct {
	name string // "device 1", "2 devices at once"
	rows []measure.Transfer
}

// deviceGroups splits a report's transfers by device: one group for a
// report of one device, else one per device and one for all at once.
func deviceGroups(r *measure.Report) []deviceGroup {
	devs := r.Devices()
	all := slices.DeleteFunc(slices.Clone(r.Transfers), func(t measure.Transfer) bool { return t.Device != measure.AllDevices })
	if len(devs) <= 1 && len(all) == 0 {
		return []deviceGroup{{rows: r.Transfers}}
	}
	var out []deviceGroup
	for _, d := range devs {
		out = append(out, deviceGroup{fmt.Sprintf("device %d", d),
			slices.DeleteFunc(slices.Clone(r.Transfers), func(t measure.Transfer) bool { return t.Device != d })})
	}
	if len(all) > 0 {
		out = append(out, deviceGroup{fmt.Sprintf("%d devices at once (bytes summed)", len(devs)), all})
	}
	return out
}

// transferTablesOf returns the transfer tables of rows of one device (or
// of all at once), their titles starting with prefix.
func transferTablesOf(rows []measure.Transfer, prefix string) []table {
	var out []table
	for _, d := range directionsIn(rows) {
		ts := inDirection(rows, d)
		kinds := kindsIn(ts)
		sizes := sizesOf(ts)
		head := []string{"size"}
		for _, k := range kinds {
			head = append(head, string(k))
		}

		bw := table{
			title: fmt.Sprintf("%sTransfers %s: bandwidth, GB/s (median)", prefix, directionTitle(d)),
			head:  head,
		}
		lat := table{
			title: fmt.Sprintf("%sTransfers %s: latency, µs (median), up to %s", prefix, directionTitle(d), formatSize(latencyMaxSize)),
			head:  head,
		}
		for _, n := range sizes {
			bwRow := []string{formatSize(n)}
			latRow := []string{formatSize(n)}
			for _, k := range kinds {
				t, ok := find(ts, k, n)
				if !ok {
					bwRow = append(bwRow, missing)
					latRow = append(latRow, missing)
					continue
				}
				bwRow = append(bwRow, fixed(t.GBps))
				latRow = append(latRow, fixed(float64(t.Median)/float64(time.Microsecond)))
			}
			bw.rows = append(bw.rows, bwRow)
			if n <= latencyMaxSize {
				lat.rows = append(lat.rows, latRow)
			}
		}
		out = append(out, bw)
		if len(lat.rows) > 0 {
			out = append(out, lat)
		}
	}
	return out
}

// directionTitle names a direction in a table title.
func directionTitle(d measure.Direction) string {
	switch d {
	case measure.H2D:
		return "H2D (host to device)"
	case measure.D2H:
		return "D2H (device to host)"
	case measure.Both:
		return "both (H2D and D2H at once, GB/s summed)"
	}
	return string(d)
}

// allocTables returns the allocation table: per operation (in the order
// first seen), per size ascending, the median time and, from 1 MiB up,
// the time per GiB.
func allocTables(r *measure.Report) []table {
	if len(r.Allocs) == 0 {
		return nil
	}
	t := table{
		title: "Allocations: time per call (median)",
		head:  []string{"operation", "size", "median", "min", "max", "ms/GiB", "calls"},
	}
	ops := ordered(nil, r.Allocs, func(a measure.Alloc) string { return a.Op })
	for _, op := range ops {
		var rows []measure.Alloc
		for _, a := range r.Allocs {
			if a.Op == op {
				rows = append(rows, a)
			}
		}
		slices.SortStableFunc(rows, func(a, b measure.Alloc) int { return cmp.Compare(a.Size, b.Size) })
		for _, a := range rows {
			perGiB := missing
			if a.Size >= 1<<20 {
				ms := float64(a.Median) / float64(time.Millisecond)
				perGiB = perGiBCell(ms * float64(1<<30) / float64(a.Size))
			}
			t.rows = append(t.rows, []string{
				a.Op, formatSize(a.Size),
				formatDuration(a.Median), formatDuration(a.Min), formatDuration(a.Max),
				perGiB, fmt.Sprint(a.Repeats),
			})
		}
	}
	return []table{t}
}

// perGiBCell writes a time in ms per GiB, "<0.01" for what would round
// to zero.
func perGiBCell(ms float64) string {
	if ms > 0 && ms < 0.005 {
		return "<0.01"
	}
	return sig3(ms)
}

// poolTables returns the pool table: a row per goroutine count (and
// buffer size, when runs used more than one), for each implementation
// its millions of Get+Release pairs per second and ns per pair, and the
// ratio of pinpool's throughput to the seed design's.
func poolTables(r *measure.Report) []table {
	if len(r.Pool) == 0 {
		return nil
	}
	impls := ordered([]string{measure.ImplPinpool, measure.ImplSeed}, r.Pool, func(p measure.PoolRun) string { return p.Impl })
	type key struct {
		size       int64
		goroutines int
	}
	keys := ordered(nil, r.Pool, func(p measure.PoolRun) key { return key{p.Size, p.Goroutines} })
	slices.SortStableFunc(keys, func(a, b key) int {
		if c := cmp.Compare(a.size, b.size); c != 0 {
			return c
		}
		return a.goroutines - b.goroutines
	})
	run := func(impl string, k key) (measure.PoolRun, bool) {
		for _, p := range r.Pool {
			if p.Impl == impl && p.Size == k.size && p.Goroutines == k.goroutines {
				return p, true
			}
		}
		return measure.PoolRun{}, false
	}
	sizes := ordered(nil, r.Pool, func(p measure.PoolRun) int64 { return p.Size })
	backends := ordered(nil, r.Pool, func(p measure.PoolRun) string { return p.Backend })
	ratio := slices.Contains(impls, measure.ImplPinpool) && slices.Contains(impls, measure.ImplSeed)

	title := "Pool: Get+Release pairs, all goroutines"
	var notes []string
	if len(sizes) == 1 {
		notes = append(notes, formatSize(sizes[0])+" buffers")
	}
	if len(backends) == 1 && backends[0] != "" {
		notes = append(notes, backends[0]+" backend")
	}
	if len(notes) > 0 {
		title += " (" + strings.Join(notes, ", ") + ")"
	}
	t := table{title: title}
	if len(sizes) > 1 {
		t.head = append(t.head, "size")
	}
	t.head = append(t.head, "goroutines")
	for _, impl := range impls {
		t.head = append(t.head, impl+" M ops/s", impl+" ns/op")
	}
	if ratio {
		t.head = append(t.head, measure.ImplPinpool+"/"+measure.ImplSeed)
	}
	for _, k := range keys {
		var row []string
		if len(sizes) > 1 {
			row = append(row, formatSize(k.size))
		}
		row = append(row, fmt.Sprint(k.goroutines))
		for _, impl := range impls {
			if p, ok := run(impl, k); ok {
				row = append(row, sig3(p.OpsPerSec/1e6), sig3(p.NsPerOp))
			} else {
				row = append(row, missing, missing)
			}
		}
		if ratio {
			cell := missing
			p, okP := run(measure.ImplPinpool, k)
			s, okS := run(measure.ImplSeed, k)
			if okP && okS && s.OpsPerSec > 0 {
				cell = sig3(p.OpsPerSec/s.OpsPerSec) + "×"
			}
			row = append(row, cell)
		}
		t.rows = append(t.rows, row)
	}
	return []table{t}
}

// hostCopyTables returns the host copy table: GB/s, a row per size and a
// column per goroutine count.
func hostCopyTables(r *measure.Report) []table {
	if len(r.HostCopies) == 0 {
		return nil
	}
	sizes := ordered(nil, r.HostCopies, func(h measure.HostCopy) int64 { return h.Size })
	slices.Sort(sizes)
	threads := ordered(nil, r.HostCopies, func(h measure.HostCopy) int { return h.Threads })
	slices.Sort(threads)
	t := table{title: "Host memory copy, GB/s (the ceiling of staging: ordinary memory copied by N goroutines, no DMA running)"}
	t.head = append(t.head, "size")
	for _, n := range threads {
		t.head = append(t.head, goroutines(n))
	}
	for _, size := range sizes {
		row := []string{formatSize(size)}
		for _, n := range threads {
			cell := missing
			for _, h := range r.HostCopies {
				if h.Size == size && h.Threads == n {
					cell = sig3(h.GBps)
				}
			}
			row = append(row, cell)
		}
		t.rows = append(t.rows, row)
	}
	return []table{t}
}

// fileTables returns the file benchmark's table: GB/s per way, from the
// page cache, from the disk, and back to a file.
func fileTables(r *measure.Report) []table {
	if len(r.Files) == 0 {
		return nil
	}
	t := table{title: fmt.Sprintf("A %s file to the GPU and back, GB/s (best of the repeats)", formatSize(r.Files[0].Size)),
		head: []string{"way", "file to GPU, warm", "file to GPU, cold", "GPU to file"}}
	for _, way := range ordered(nil, r.Files, func(f measure.FileRun) string { return f.Way }) {
		row := []string{way, missing, missing, missing}
		for _, f := range r.Files {
			if f.Way != way {
				continue
			}
			switch {
			case f.Direction == measure.D2H:
				row[3] = sig3(f.GBps)
			case f.Cache == "warm":
				row[1] = sig3(f.GBps)
			case f.Cache == "cold":
				row[2] = sig3(f.GBps)
			}
		}
		t.rows = append(t.rows, row)
	}
	return []table{t}
}

// goroutines is "1 goroutine", "2 goroutines", ...
func goroutines(n int) string {
	if n == 1 {
		return "1 goroutine"
	}
	return fmt.Sprintf("%d goroutines", n)
}

// driverLabel names the driver as nvidia-smi does, its release, with the
// CUDA version it supports: "driver 580.159.04 (CUDA 13.0)".
func driverLabel(m measure.Machine) string {
	switch {
	case m.DriverRelease != "" && m.Driver != "":
		return "driver " + m.DriverRelease + " (CUDA " + m.Driver + ")"
	case m.DriverRelease != "":
		return "driver " + m.DriverRelease
	case m.Driver != "":
		return "driver for CUDA " + m.Driver
	}
	return ""
}
