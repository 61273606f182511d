package advise

import (
	"fmt"
	"github.com/pinpool/pinpool/internal/units"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// Thresholds of the write-combined rule.
const (
	// WriteCombinedMin is the smallest size whose write-combined/pinned
	// ratio counts: below it copies are latency-bound and the flag cannot
	// show.
	WriteCombinedMin = 1 << 20
	// WriteCombinedPays is the median write-combined/pinned H2D ratio from
	// which write-combined memory is worth its very slow CPU reads.
	WriteCombinedPays = 1.05
)

// writeCombinedRule compares write-combined with pinned memory for H2D
// copies of at least WriteCombinedMin bytes.
func writeCombinedRule(d *data, c *choices) Advice {
	var ps []point
	for _, p := range d.points(measure.H2D, measure.WriteCombined, measure.Pinned) {
		if p.size >= WriteCombinedMin {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return d.missing(TopicWriteCombined, "write-combined vs pinned H2D copies of 1 MiB and more", "write-combined", "writecombined")
	}
	rs := make([]float64, len(ps))
	for i, p := range ps {
		rs[i] = p.ratio
	}
	med := median(rs)
	last := ps[len(ps)-1]
	a := Advice{
		Topic: TopicWriteCombined,
		Evidence: fmt.Sprintf("write-combined/pinned H2D, median over %d sizes (%s): %s; at %s write-combined %s vs pinned %s",
			len(ps), sizeRange(ps), times(med), units.Size(last.size), gbps(last.num), gbps(last.den)),
		Measured: true,
	}
	if med >= WriteCombinedPays {
		c.writeCombined = true
		c.from(TopicWriteCombined)
		a.Advice = fmt.Sprintf("Use write-combined memory (cudahost.Options{Method: cudahost.HostAlloc, WriteCombined: true}) for upload-only buffers that the CPU writes and never reads: H2D copies from it are %s faster than from pinned memory here, and the CPU reads it very slowly.",
			percent(med))
	} else {
		a.Advice = fmt.Sprintf("Do not use write-combined memory: H2D copies from it are not %s faster than from pinned memory here (median %s), and the CPU reads it very slowly.",
			percent(WriteCombinedPays), times(med))
	}
	return a
}
