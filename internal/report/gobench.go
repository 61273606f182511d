package report

import (
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/pinpool/pinpool/internal/measure"
)

// goBenchPkg is the pkg configuration line of WriteGoBench's output.
const goBenchPkg = "github.com/pinpool/pinpool/cmd/pinpool"

// WriteGoBench writes r in the Go benchmark format, which
// golang.org/x/perf/benchfmt reads and benchstat compares: configuration
// lines (goos, goarch, pkg, cpu, and gpu and driver when a GPU was used),
// then one line per measurement:
//
//	BenchmarkTransfer/kind=pinned/dir=H2D/size=4KiB 	 <repeats> 	 <median> ns/op 	 <GB/s> GB/s
//	BenchmarkAlloc/op=cuMemHostAlloc/size=1MiB 	 <repeats> 	 <median> ns/op
//	BenchmarkPool/impl=pinpool/goroutines=16 	 <pairs> 	 <ns per pair> ns/op 	 <pairs/s> ops/s
//
// The iteration count is the number of timed repeats (Get+Release pairs
// for the pool); ns/op is the median time (for the pool the time of one
// pair on one goroutine, fractional). When the pool ran at more than one
// buffer size its names also carry /size=. Unit lines tell benchstat
// that more GB/s and ops/s is better. Name parts have no spaces: sizes
// are written like 4KiB, and spaces or slashes in other values become
// underscores.
func WriteGoBench(w io.Writer, r *measure.Report) error {
	if r == nil {
		return fmt.Errorf("report: nil report")
	}
	ew := &errWriter{w: w}
	m := r.Machine
	config := func(key, value string) {
		if value = strings.TrimSpace(oneLine(value)); value != "" {
			fmt.Fprintf(ew, "%s: %s\n", key, value)
		}
	}
	config("goos", m.GOOS)
	config("goarch", m.GOARCH)
	config("pkg", goBenchPkg)
	config("cpu", m.CPUModel)
	if m.NoGPU == "" {
		config("gpu", m.GPU)
		config("driver", m.Driver)
	}
	if len(r.Transfers) > 0 || len(r.HostCopies) > 0 {
		fmt.Fprintln(ew, "Unit GB/s better=higher")
	}
	if len(r.Pool) > 0 {
		fmt.Fprintln(ew, "Unit ops/s better=higher")
	}

	multi := len(deviceGroups(r)) > 1
	for _, t := range r.Transfers {
		dev := ""
		if multi {
			dev = "/device=" + deviceCell(t.Device)
		}
		fmt.Fprintf(ew, "BenchmarkTransfer%s/kind=%s/dir=%s/size=%s \t %d \t %d ns/op \t %s GB/s\n",
			dev, namePart(string(t.Kind)), namePart(string(t.Dir)), compactSize(t.Size),
			t.Repeats, int64(t.Median), ftoa(t.GBps))
	}
	for _, a := range r.Allocs {
		fmt.Fprintf(ew, "BenchmarkAlloc/op=%s/size=%s \t %d \t %d ns/op\n",
			namePart(a.Op), compactSize(a.Size), a.Repeats, int64(a.Median))
	}
	poolSizes := ordered(nil, r.Pool, func(p measure.PoolRun) int64 { return p.Size })
	for _, p := range r.Pool {
		size := ""
		if len(poolSizes) > 1 {
			size = "/size=" + compactSize(p.Size)
		}
		fmt.Fprintf(ew, "BenchmarkPool/impl=%s%s/goroutines=%d \t %d \t %s ns/op \t %s ops/s\n",
			namePart(p.Impl), size, p.Goroutines, p.Ops, ftoa(p.NsPerOp), ftoa(p.OpsPerSec))
	}
	for _, h := range r.HostCopies {
		fmt.Fprintf(ew, "BenchmarkHostCopy/size=%s/threads=%d \t %d \t %d ns/op \t %s GB/s\n",
			compactSize(h.Size), h.Threads, h.Repeats, int64(h.Median), ftoa(h.GBps))
	}
	if ew.err != nil {
		return fmt.Errorf("report: writing Go benchmark format: %w", ew.err)
	}
	return nil
}

// namePart makes s usable as the value of a benchmark name's key=value
// part: spaces and slashes become underscores, and an empty value "none".
func namePart(s string) string {
	if s == "" {
		return "none"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '/' {
			return '_'
		}
		return r
	}, s)
}
