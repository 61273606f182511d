package advise

import (
	"fmt"
	"github.com/pinpool/pinpool/internal/units"
	"strings"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// mappedRule says whether data the GPU reads should stay in mapped host
// memory (zero-copy) rather than be copied: always on an integrated GPU,
// by size on a discrete one (the kernel reading host memory in place
// against the pinned copy), never where the device cannot map host memory.
func mappedRule(d *data, c *choices) Advice {
	m := d.r.Machine
	ps := d.points(measure.H2D, measure.Mapped, measure.Pinned)
	reads := d.largest(measure.Mapped, measure.H2D)
	switch {
	case m.GPU != "" && !m.CanMapHostMemory && len(ps) == 0 && reads.size == 0:
		ev := "the device reports canMapHostMemory = 0"
		if why := d.skippedAbout("mapped", "map host"); len(why) > 0 {
			ev += " (" + strings.Join(why, "; ") + ")"
		}
		return Advice{Topic: TopicMapped, Measured: true, Evidence: ev,
			Advice: fmt.Sprintf("Do not plan on mapped (zero-copy) memory: %s cannot map host memory, so copy data to the device instead.", m.GPU)}
	case m.Integrated:
		return mappedIntegrated(d, c, reads)
	case len(ps) == 0:
		return d.missing(TopicMapped, "mapped reads vs pinned H2D copies", "mapped", "pinned")
	}
	return mappedDiscrete(ps)
}

// largest returns the largest size at which kind was measured in dir, and
// its bandwidth (size 0 when never).
func (d *data) largest(kind measure.Kind, dir measure.Direction) point {
	var best point
	for k, v := range d.bw {
		if k.kind == kind && k.dir == dir && k.size > best.size {
			best = point{size: k.size, num: v}
		}
	}
	return best
}

// mappedIntegrated advises mapped memory on an integrated GPU, which shares
// memory with the CPU: a copy would only move data within the same DRAM.
func mappedIntegrated(d *data, c *choices, reads point) Advice {
	a := Advice{Topic: TopicMapped,
		Advice: "Use mapped memory (cudahost.Options{Mapped: true}, transfer.MappedPointer) for data the GPU reads: this integrated GPU shares memory with the CPU, so kernels read it in place with no copy at all."}
	if reads.size == 0 {
		a.Evidence = "integrated GPU; not measured: the mapped read bandwidth"
		if why := d.skippedAbout("mapped"); len(why) > 0 {
			a.Evidence += " (skipped: " + strings.Join(why, "; ") + ")"
		}
		return a
	}
	a.Measured = true
	c.mapped = true
	c.from(TopicMapped)
	a.Evidence = fmt.Sprintf("integrated GPU; the kernel reads mapped memory at %s at %s", gbps(reads.num), units.Size(reads.size))
	if p, ok := d.bw[transferKey{measure.Pinned, measure.H2D, reads.size}]; ok {
		a.Evidence += fmt.Sprintf(", where a pinned copy moves %s and still leaves the data to be read", gbps(p))
	}
	return a
}

// mappedDiscrete compares, size by size, the kernel reading mapped host
// memory with the pinned copy, for data the GPU reads once.
func mappedDiscrete(ps []point) Advice {
	last := ps[len(ps)-1]
	a := Advice{Topic: TopicMapped, Measured: true,
		Evidence: fmt.Sprintf("mapped read vs pinned copy H2D at %s: %s vs %s (%s); mapped/pinned by size: %s",
			units.Size(last.size), gbps(last.num), gbps(last.den), times(last.ratio), sizeList(ps))}
	wins := func(p point) bool { return p.ratio >= 1 }
	var won []string
	for _, p := range ps {
		if wins(p) {
			won = append(won, units.Size(p.size))
		}
	}
	prefix := 0
	for prefix < len(ps) && wins(ps[prefix]) {
		prefix++
	}
	from := suffixFrom(ps, wins)
	switch {
	case len(won) == len(ps):
		a.Advice = "Read data the GPU reads once in place from mapped memory (cudahost.Options{Mapped: true}): the kernel reading host memory beats the pinned copy at every size measured."
	case len(won) == 0:
		a.Advice = fmt.Sprintf("Copy data to the device from pinned memory rather than reading it mapped: the pinned copy beats the kernel reading host memory in place at every size measured (%s).", sizeRange(ps))
	case prefix == len(won):
		a.Advice = fmt.Sprintf("Read data the GPU reads once in place from mapped memory up to %s (cudahost.Options{Mapped: true}); copy larger data from pinned memory.", units.Size(ps[prefix-1].size))
	case len(ps)-from == len(won):
		a.Advice = fmt.Sprintf("Read data the GPU reads once in place from mapped memory from %s on (cudahost.Options{Mapped: true}); copy smaller data from pinned memory.", units.Size(ps[from].size))
	default:
		a.Advice = fmt.Sprintf("Copy data to the device from pinned memory: mapped reads beat the copy only at some sizes (%s), so measure your own sizes before reading in place.", strings.Join(won, ", "))
	}
	return a
}
