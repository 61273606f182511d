package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/hostmem"
	"github.com/pinpool/pinpool/internal/units"
	"github.com/schollz/progressbar/v3"
)

// arenaCmd is `pinpool arena`: a large pinned arena made several ways, one
// after another, each timed with a neighbour's copies on the GPU (see
// measure.MeasureArena), then freed and timed again. Without a GPU it
// measures the host backend (mmap + prefault + mlock) the same way, within
// RLIMIT_MEMLOCK.
type arenaCmd struct {
	Sizes    []byteSize `help:"Arena sizes, one measurement of every way for each. Default: 4 GiB, or on the host backend as much as RLIMIT_MEMLOCK lets this process lock, if that is less."`
	Ways     []arenaWay `help:"Ways to make the arena: pool[+cudahost|+register|+register+small|+hostalloc|+host][:blocks=SIZE], hostalloc-raw, register[:piece=SIZE][:prefault=N][:regw=N][:huge=0|1][:group=SIZE][:pause=D|off][:alloc=SIZE], hostalloc[:alloc=SIZE][:pause=D|off], host[:alloc=SIZE][:prefault=N][:huge=0|1]. Default: the pool's defaults as 2 MiB blocks and as one buffer, and one cuMemHostAlloc (the host backend alone without a GPU)."`
	JSON     bool       `short:"j" help:"One JSON object per measurement."`
	Progress string     `enum:"auto,always,never" default:"auto" help:"Progress bar on stderr: auto (when it is a terminal), always, never."`
	Headroom byteSize   `help:"Memory to leave available: a size is refused when MemAvailable (or the cgroup's headroom) less this is smaller." default:"4GiB"`
}

func (c *arenaCmd) Help() string {
	return `Each way reserves the whole size, and frees it before the next. On a GPU a neighbour goroutine copies 64 KiB from pinned memory to the device every 200 µs on its own stream; its p50, p99 and max show what the growth makes other users of the driver wait.`
}

// Run measures every size with every way.
func (c *arenaCmd) Run(g *globals) error {
	var gpu *cuda.Context
	if err := cuda.Load(); err == nil {
		if ctx, err := cuda.NewContext(0); err == nil {
			gpu = ctx
			defer ctx.Close()
		}
	}
	parsed := make([]measure.ArenaWay, len(c.Ways))
	for i, w := range c.Ways {
		parsed[i] = measure.ArenaWay(w)
	}
	if len(parsed) == 0 {
		specs := []string{"pool:blocks=2MiB", "pool", "hostalloc-raw"}
		if gpu == nil {
			specs = []string{"host", "pool+host:blocks=2MiB", "pool+host"}
		}
		for _, s := range specs {
			w, _ := measure.ParseArenaWay(s)
			parsed = append(parsed, w)
		}
	}
	if gpu == nil {
		fmt.Fprintln(g.stderr, "pinpool arena: no GPU: measuring the host backend (mmap + mlock), without a neighbour")
	}
	sizes := c.Sizes
	if len(sizes) == 0 {
		sizes = []byteSize{defaultArenaSize(gpu != nil)}
	}
	var results []measure.ArenaResult
	failed := 0
	for _, size := range sizes {
		n := int64(size)
		if err := c.fits(n, gpu != nil); err != nil {
			return err
		}
		for _, w := range parsed {
			if g.ctx.Err() != nil {
				g.partial = true
				break
			}
			bar := arenaBar(g.stderr, c.Progress, n, w.Spec)
			o := measure.ArenaOptions{Context: gpu}
			if bar != nil {
				o.Progress = func(done int64) { _ = bar.Set64(done) }
			}
			r := measure.MeasureArena(g.ctx, w, n, o)
			if bar != nil {
				_ = bar.Clear()
			}
			if r.Error != "" {
				failed++
			}
			results = append(results, r)
			if c.JSON {
				b, _ := json.Marshal(r)
				fmt.Fprintln(g.stdout, string(b))
			}
		}
	}
	if !c.JSON {
		writeArenaTable(g.stdout, results)
	}
	if failed == len(results) && len(results) > 0 {
		return errors.New("arena: every measurement failed")
	}
	return nil
}

// fits refuses a size the system cannot lock: above MemAvailable or the
// cgroup's headroom less --headroom, or, for the host backend, above
// RLIMIT_MEMLOCK's allowance.
func (c *arenaCmd) fits(n int64, gpu bool) error {
	if mi, err := hostmem.ReadMemInfo(); err == nil && n > int64(mi.Available)-int64(c.Headroom) {
		return fmt.Errorf("arena: %s is more than MemAvailable (%s) less --headroom %s", units.Size(n), units.Size(int64(mi.Available)), units.Size(int64(c.Headroom)))
	}
	if cg, err := hostmem.ReadCgroupMemory(); err == nil && cg.Limit > 0 {
		if room := cg.Headroom(); n > room-int64(c.Headroom) {
			return fmt.Errorf("arena: %s is more than the cgroup's headroom (%s) less --headroom %s: locked memory counts against the cgroup", units.Size(n), units.Size(room), units.Size(int64(c.Headroom)))
		}
	}
	if !gpu {
		if allow, limited, err := hostmem.LockAllowance(); err == nil && limited && uint64(n) > allow {
			return fmt.Errorf("arena: %s is more than RLIMIT_MEMLOCK lets this process lock (%s); give a smaller --sizes or raise it with %s", units.Size(n), units.Size(int64(allow)), hostmem.LockLimitHint())
		}
	}
	return nil
}

// defaultArenaSize is 4 GiB, or on the host backend what RLIMIT_MEMLOCK
// allows, in whole 2 MiB blocks, when that is less (an ordinary user's 8
// MiB measures 6 MiB, leaving room for the tool's own locked memory).
func defaultArenaSize(gpu bool) byteSize {
	const def, block = 4 << 30, 2 << 20
	if gpu {
		return def
	}
	allow, limited, err := hostmem.LockAllowance()
	if err != nil || !limited || allow >= def {
		return def
	}
	n := int64(allow) - block
	return byteSize(max(block, n/block*block))
}

func arenaBar(w io.Writer, mode string, total int64, what string) *progressbar.ProgressBar {
	if mode == "never" || mode == "auto" && !isTerminal(w) {
		return nil
	}
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}

func writeArenaTable(w io.Writer, rs []measure.ArenaResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "way\tsize\tbackend\ttook\tGB/s\thuge pages\tneighbour p50/p99/max\tclose\tneighbour at close p99/max\terror")
	for _, r := range rs {
		nb, nbc := "-", "-"
		if l := r.Neighbour; l != nil {
			nb = fmt.Sprintf("%s / %s / %s (%d)", units.Duration(l.P50), units.Duration(l.P99), units.Duration(l.Max), l.Count)
		}
		if l := r.NeighbourClose; l != nil {
			nbc = fmt.Sprintf("%s / %s", units.Duration(l.P99), units.Duration(l.Max))
		}
		rate := "-"
		if r.GBps > 0 {
			rate = fmt.Sprintf("%.1f", r.GBps)
		}
		huge := "-"
		if r.HugeBytes > 0 {
			huge = units.Size(r.HugeBytes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Way, units.Size(r.Bytes), r.Backend, units.Duration(r.Took), rate, huge, nb, units.Duration(r.CloseTook), nbc, r.Error)
	}
	tw.Flush()
}

// arenaWay is a --ways value: a way spec that measure.ParseArenaWay reads.
type arenaWay measure.ArenaWay

// UnmarshalText implements encoding.TextUnmarshaler (used by kong).
func (w *arenaWay) UnmarshalText(text []byte) error {
	v, err := measure.ParseArenaWay(string(text))
	if err != nil {
		return badValue(string(text), err.Error())
	}
	*w = arenaWay(v)
	return nil
}
