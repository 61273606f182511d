package advise

import (
	"fmt"
	"strings"
)

// optionsRule sums up, as Go code, the option values that the other rules
// recommended from measured data.
func optionsRule(c *choices) Advice {
	var parts []string
	var fields []string
	switch c.method {
	case "register":
		fields = append(fields, "Method: cudahost.Register", "HugePages: true")
	case "hostalloc":
		fields = append(fields, "Method: cudahost.HostAlloc")
	}
	if c.mapped {
		fields = append(fields, "Mapped: true")
	}
	switch {
	case c.method == "host":
		parts = append(parts, "pinpool.Options{Backend: pinpool.NewHostBackend(hostmem.Options{})}")
	case len(fields) > 0:
		parts = append(parts, fmt.Sprintf("pinpool.Options{Backend: pinpool.CUDABackend(b)} with b from cudahost.New(cudahost.Options{%s})", strings.Join(fields, ", ")))
	}
	if c.writeCombined {
		parts = append(parts, "a second pool for upload-only buffers on cudahost.Options{Method: cudahost.HostAlloc, WriteCombined: true}")
	}
	switch {
	case c.directNever:
		parts = append(parts, "transfer.Options{DirectBelow: math.MaxInt}")
	case c.directBelow > 0:
		parts = append(parts, fmt.Sprintf("transfer.Options{DirectBelow: %s}", sizeCode(c.directBelow)))
	}
	if len(parts) == 0 {
		return Advice{Topic: TopicOptions,
			Advice:   "No option values to recommend: keep the zero Options.",
			Evidence: "not measured: none of the allocation, write-combined, mapped and direct-below rules had data"}
	}
	ev := "Based on the " + strings.Join(c.sources, ", ") + " lines above"
	if c.method == "register" {
		ev += "; HugePages: true is what pinpool.DefaultBackend pairs with Register, not a figure of this run"
	}
	ev += "."
	return Advice{Topic: TopicOptions, Measured: true,
		Advice:   "Configure " + strings.Join(parts, "; ") + ".",
		Evidence: ev}
}
