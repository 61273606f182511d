package advise

import (
	"fmt"
	"strings"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// Advice is one line of advice: what to do on the measured machine and the
// figures it rests on.
type Advice struct {
	// Topic is a short key naming the rule (the Topic constants).
	Topic string `json:"topic"`
	// Advice is one imperative sentence for this machine.
	Advice string `json:"advice"`
	// Evidence is the measured figures the advice rests on, or what was not
	// measured.
	Evidence string `json:"evidence"`
	// Measured is false when the rule's data was missing: the line then
	// says what was not measured instead of advising.
	Measured bool `json:"measured"`
}

// Topics of the advice, in the order Advise returns them.
const (
	TopicGPU           = "gpu"                // only without a GPU: why the GPU rules were skipped
	TopicPinned        = "pinned-vs-pageable" // pinned against pageable copies, per direction
	TopicWriteCombined = "write-combined"     // write-combined against pinned H2D copies
	TopicMapped        = "mapped"             // zero-copy reads against pinned copies
	TopicStaged        = "staged"             // transfer.Copier staging against pageable copies, per direction
	TopicRegistered    = "registered"         // Copier.Register against staging
	TopicDirectBelow   = "direct-below"       // transfer.Options.DirectBelow
	TopicAllocation    = "allocation"         // allocation against a pool hit; the backend's method
	TopicPool          = "pool"               // pinpool against the seed design's throughput
	TopicOptions       = "options"            // the recommended option values, as Go code
)

// choices collects the option values the rules recommend, for the options
// line.
type choices struct {
	method        string // "hostalloc", "register", "host" or ""
	writeCombined bool   // write-combined upload buffers pay
	mapped        bool   // integrated GPU with a measured mapped read
	directBelow   int64  // transfer.Options.DirectBelow; 0: no data
	directNever   bool   // staging never pays: DirectBelow math.MaxInt
	sources       []string
}

// from records that a rule contributed to the options line.
func (c *choices) from(topic string) {
	for _, s := range c.sources {
		if s == topic {
			return
		}
	}
	c.sources = append(c.sources, topic)
}

// Advise applies the rules to r and returns the advice, one Advice per
// line: pinned against pageable memory (one line per direction),
// write-combined memory, mapped memory, staged copies (one line per
// direction) and registration, the transfer engine's DirectBelow, the cost
// of allocation (against a pool hit, and the backend's method), the pool
// against the seed design, and a summary of the recommended options. A rule
// without data returns a line with Measured false. With r.Machine.NoGPU set
// only the host-side rules apply, after a line that says why. A nil report
// is treated as an empty one.
func Advise(r *measure.Report) []Advice {
	if r == nil {
		r = &measure.Report{}
	}
	d := newData(r)
	c := &choices{}
	var out []Advice
	if r.Machine.NoGPU != "" {
		out = append(out, Advice{
			Topic:    TopicGPU,
			Advice:   "Use locked host memory only: the GPU rules were skipped because no GPU was used.",
			Evidence: "no GPU: " + r.Machine.NoGPU,
			Measured: true,
		})
	} else {
		out = append(out, pinnedRule(d)...)
		out = append(out, writeCombinedRule(d, c))
		out = append(out, mappedRule(d, c))
		out = append(out, stagedRule(d)...)
		out = append(out, registeredRule(d))
		out = append(out, directBelowRule(d, c))
	}
	out = append(out, allocationRule(d, c)...)
	out = append(out, poolRule(d))
	out = append(out, optionsRule(c))
	return out
}

// missing returns the line of a rule whose data is missing: what was not
// measured, and the report's Skipped lines that mention any of words.
func (d *data) missing(topic, what string, words ...string) Advice {
	ev := "not measured: " + what
	if why := d.skippedAbout(words...); len(why) > 0 {
		ev += " (skipped: " + strings.Join(why, "; ") + ")"
	}
	return Advice{
		Topic:    topic,
		Advice:   fmt.Sprintf("No advice on %s: it was not measured.", what),
		Evidence: ev,
	}
}
