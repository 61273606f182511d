package report

import (
	"fmt"
	"golang.org/x/perf/benchfmt"
	"io"
	"strings"
	"unicode"

	"github.com/pinpool/pinpool/internal/measure"
)

// goBenchPkg is the pkg configuration line of WriteGoBench's output.
const goBenchPkg = "github.com/pinpool/pinpool/cmd/pinpool"

// WriteGoBench writes r in the Go benchmark format, with
// golang.org/x/perf/benchfmt's writer, which benchstat reads: configuration
// lines (goos, goarch, pkg, cpu, and gpu and driver when a GPU was used),
// then one line per measurement:
//
//	BenchmarkTransfer/kind=pinned/dir=H2D/size=4KiB <repeats> <median> ns/op <GB/s> GB/s
//	BenchmarkAlloc/op=cuMemHostAlloc/size=1MiB <repeats> <median> ns/op
//	BenchmarkPool/impl=pinpool/goroutines=16 <pairs> <ns per pair> ns/op <pairs/s> ops/s
//	BenchmarkHostCopy/size=16MiB/threads=8 <repeats> <median> ns/op <GB/s> GB/s
//
// The iteration count is the number of timed repeats (Get+Release pairs
// for the pool); ns/op is the median time (for the pool the time of one
// pair on one goroutine, fractional). When the pool ran at more than one
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
	for _, t := range r.Transfers {
		dev := ""
		if multi {
			dev = "/device=" + deviceCell(t.Device)
		}
		result(fmt.Sprintf("Transfer%s/kind=%s/dir=%s/size=%s", dev, namePart(string(t.Kind)), namePart(string(t.Dir)), compactSize(t.Size)),
			t.Repeats, ns(float64(int64(t.Median))), benchfmt.Value{Value: t.GBps, Unit: "GB/s"})
	}
	for _, a := range r.Allocs {
		result(fmt.Sprintf("Alloc/op=%s/size=%s", namePart(a.Op), compactSize(a.Size)), a.Repeats, ns(float64(int64(a.Median))))
	}
	poolSizes := ordered(nil, r.Pool, func(p measure.PoolRun) int64 { return p.Size })
	for _, p := range r.Pool {
		size := ""
		if len(poolSizes) > 1 {
			size = "/size=" + compactSize(p.Size)
		}
		result(fmt.Sprintf("Pool/impl=%s%s/goroutines=%d", namePart(p.Impl), size, p.Goroutines), int(p.Ops),
			ns(p.NsPerOp), benchfmt.Value{Value: p.OpsPerSec, Unit: "ops/s"})
	}
	for _, h := range r.HostCopies {
		result(fmt.Sprintf("HostCopy/size=%s/threads=%d", compactSize(h.Size), h.Threads), h.Repeats,
			ns(float64(int64(h.Median))), benchfmt.Value{Value: h.GBps, Unit: "GB/s"})
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
