package report

import (
	"fmt"
	"golang.org/x/perf/benchfmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// goBenchPkg is the pkg configuration line of WriteGoBench's output.
const goBenchPkg = "github.com/pinpool/pinpool/cmd/pinpool"

// WriteGoBench writes r in the Go benchmark format, with
// golang.org/x/perf/benchfmt's writer, which benchstat reads: configuration
// lines (goos, goarch, pkg, cpu, and gpu and driver when a GPU was used),
// then, as go test -bench -count=N does, one line per run of a
// measurement, so that benchstat sees every run as a sample:
//
//	BenchmarkTransfer/kind=pinned/dir=H2D/size=4KiB <repeats> <mean> ns/op <GB/s> GB/s
//	BenchmarkAlloc/op=cuMemHostAlloc/size=1MiB <repeats> <mean> ns/op
//	BenchmarkPool/impl=pinpool/goroutines=16 <pairs> <ns per pair> ns/op <pairs/s> ops/s
//	BenchmarkHostCopy/size=16MiB/threads=8 <repeats> <mean> ns/op <GB/s> GB/s
//
// A transfer, allocation or host copy row has a line for each of its Runs
// (its repeats in as many consecutive batches as bench's --repeats, or a
// line per call of an allocation): the iteration count is the batch's
// repeats and ns/op their mean time. A row without Runs (a report saved
// before they were recorded) has one line of all its repeats at the
// median. A pool point has a line per timed slice of its run (--repeats
// of them; one line for a saved report without them): the iteration
// count is the slice's Get+Release pairs and ns/op the time of one pair
// on one goroutine, fractional. When the pool ran at more than one
// buffer size its names also carry /size=, and with several devices the
// transfers /device=N (or all). Unit lines tell benchstat
// that more GB/s and ops/s is better. Name parts have no spaces: sizes
// are written like 4KiB, and spaces or slashes in other values become
// underscores.
func WriteGoBench(w io.Writer, r *measure.Report) error {
	if r == nil {
		return fmt.Errorf("report: nil report")
	}
	bw := benchfmt.NewWriter(w)
	var err error
	write := func(rec benchfmt.Record) {
		if err == nil {
			err = bw.Write(rec)
		}
	}
	m := r.Machine
	base := &benchfmt.Result{}
	config := func(key, value string) {
		if value = strings.TrimSpace(oneLine(value)); value != "" {
			base.Config = append(base.Config, benchfmt.Config{Key: key, Value: []byte(value), File: true})
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
		write(&benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: "GB/s", Key: "better"}, OrigUnit: "GB/s", Value: "higher"})
	}
	if len(r.Pool) > 0 {
		write(&benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: "ops/s", Key: "better"}, OrigUnit: "ops/s", Value: "higher"})
	}
	result := func(name string, iters int, values ...benchfmt.Value) {
		res := base.Clone()
		res.Name = benchfmt.Name(name)
		res.Iters = iters
		res.Values = values
		write(res)
	}
	ns := func(v float64) benchfmt.Value { return benchfmt.Value{Value: v, Unit: "ns/op"} }

	multi := len(deviceGroups(r)) > 1
	// runs writes a line per run of a row (bytes > 0 adds GB/s), or, when
	// it has no runs, one of all its repeats at the median, at the row's
	// rate gbps.
	runs := func(name string, rs []measure.RepeatRun, repeats int, median time.Duration, bytes int64, gbps float64) {
		if len(rs) == 0 {
			values := []benchfmt.Value{ns(float64(int64(median)))}
			if bytes > 0 {
				values = append(values, benchfmt.Value{Value: gbps, Unit: "GB/s"})
			}
			result(name, repeats, values...)
			return
		}
		for _, run := range rs {
			values := []benchfmt.Value{ns(float64(int64(run.Mean)))}
			if bytes > 0 && run.Mean > 0 {
				values = append(values, benchfmt.Value{Value: float64(bytes) / run.Mean.Seconds() / 1e9, Unit: "GB/s"})
			}
			result(name, run.N, values...)
		}
	}
	for _, t := range r.Transfers {
		dev := ""
		if multi {
			dev = "/device=" + deviceCell(t.Device)
		}
		name := fmt.Sprintf("Transfer%s/kind=%s/dir=%s/size=%s", dev, namePart(string(t.Kind)), namePart(string(t.Dir)), compactSize(t.Size))
		bytes := t.Bytes()
		if t.Device == measure.AllDevices && len(t.Runs) > 0 && t.Median > 0 {
			// Size bytes on each device: the rate is the sum over them.
			bytes = int64(t.GBps * 1e9 * t.Median.Seconds())
		}
		runs(name, t.Runs, t.Repeats, t.Median, bytes, t.GBps)
	}
	for _, a := range r.Allocs {
		runs(fmt.Sprintf("Alloc/op=%s/size=%s", namePart(a.Op), compactSize(a.Size)), a.Runs, a.Repeats, a.Median, 0, 0)
	}
	poolSizes := ordered(nil, r.Pool, func(p measure.PoolRun) int64 { return p.Size })
	for _, p := range r.Pool {
		size := ""
		if len(poolSizes) > 1 {
			size = "/size=" + compactSize(p.Size)
		}
		name := fmt.Sprintf("Pool/impl=%s%s/goroutines=%d", namePart(p.Impl), size, p.Goroutines)
		if len(p.Runs) == 0 {
			result(name, int(p.Ops), ns(p.NsPerOp), benchfmt.Value{Value: p.OpsPerSec, Unit: "ops/s"})
		}
		for _, s := range p.Runs {
			if s.Ops > 0 && s.Elapsed > 0 {
				result(name, int(s.Ops), ns(float64(s.Elapsed.Nanoseconds())*float64(p.Goroutines)/float64(s.Ops)),
					benchfmt.Value{Value: float64(s.Ops) / s.Elapsed.Seconds(), Unit: "ops/s"})
			}
		}
	}
	for _, h := range r.HostCopies {
		runs(fmt.Sprintf("HostCopy/size=%s/threads=%d", compactSize(h.Size), h.Threads), h.Runs, h.Repeats, h.Median, h.Size, h.GBps)
	}
	if err != nil {
		return fmt.Errorf("report: writing Go benchmark format: %w", err)
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
