package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// csvHeader is the header row of WriteCSV: one set of columns for the
// rows of every section, a row's unused cells left empty.
var csvHeader = []string{
	"section", "kind", "direction", "op", "impl", "size_bytes", "goroutines",
	"repeats", "median_ns", "min_ns", "max_ns", "gigabytes_per_second", "ops_per_second", "ns_per_op", "device",
}

// The sections of WriteCSV's rows (its first column).
const (
	sectionTransfer = "transfer" // a measure.Transfer
	sectionAlloc    = "alloc"    // a measure.Alloc
	sectionPool     = "pool"     // a measure.PoolRun
	sectionHostCopy = "hostcopy" // a measure.HostCopy (goroutines: its threads)
)

// WriteCSV writes r as one CSV table: a header row
//
//	section,kind,direction,op,impl,size_bytes,goroutines,repeats,median_ns,min_ns,max_ns,gigabytes_per_second,ops_per_second,ns_per_op,device
//
// then a row per transfer, per allocation measurement, per pool run and
// per host copy, in report order, section being "transfer", "alloc",
// "pool" or "hostcopy" (its threads in the goroutines column; a transfer's
// device is its ordinal, or "all" for all devices at once) and the
// cells a section has no use for empty. Times are integer nanoseconds,
// sizes bytes, and rates are written in full precision. The machine, the
// command, the transfers' timers and the pool runs' operation counts,
// elapsed times and backends have no column; WriteJSON keeps everything.
func WriteCSV(w io.Writer, r *measure.Report) error {
	if r == nil {
		return fmt.Errorf("report: nil report")
	}
	cw := csv.NewWriter(w)
	write := func(rec []string) {
		_ = cw.Write(rec) // the error stays in cw; see cw.Error below
	}
	write(csvHeader)
	for _, t := range r.Transfers {
		write([]string{
			sectionTransfer, string(t.Kind), string(t.Dir), "", "",
			itoa(t.Size), "", strconv.Itoa(t.Repeats),
			nanos(t.Median), nanos(t.Min), nanos(t.Max),
			ftoa(t.GBps), "", "", deviceCell(t.Device),
		})
	}
	for _, a := range r.Allocs {
		write([]string{
			sectionAlloc, "", "", a.Op, "",
			itoa(a.Size), "", strconv.Itoa(a.Repeats),
			nanos(a.Median), nanos(a.Min), nanos(a.Max),
			"", "", "", "",
		})
	}
	for _, p := range r.Pool {
		write([]string{
			sectionPool, "", "", "", p.Impl,
			itoa(p.Size), strconv.Itoa(p.Goroutines), "",
			"", "", "",
			"", ftoa(p.OpsPerSec), ftoa(p.NsPerOp), "",
		})
	}
	for _, h := range r.HostCopies {
		write([]string{
			sectionHostCopy, "", "", "", "",
			itoa(h.Size), strconv.Itoa(h.Threads), strconv.Itoa(h.Repeats),
			nanos(h.Median), nanos(h.Min), nanos(h.Max),
			ftoa(h.GBps), "", "", "",
		})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("report: writing CSV: %w", err)
	}
	return nil
}

// deviceCell writes a transfer's device: its ordinal, or "all".
func deviceCell(d int) string {
	if d == measure.AllDevices {
		return "all"
	}
	return strconv.Itoa(d)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func nanos(d time.Duration) string { return strconv.FormatInt(int64(d), 10) }

// ftoa writes v in the fewest digits that read back as v, without an
// exponent.
func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
