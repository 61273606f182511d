package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"
	"github.com/pinpool/pinpool/cmd/pinpool/internal/textwrap"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/hostmem"
	"github.com/pinpool/pinpool/internal/units"
)

// monitorCmd is `pinpool monitor`: locked and pinned memory over time.
//
// Each sample reads /proc/meminfo (MemTotal, MemAvailable, Mlocked),
// RLIMIT_MEMLOCK (of --pid when given, from /proc/PID/limits; else of this
// process), the VmLck and VmPin lines of /proc/PID/status when --pid is
// given (VmPin is missing on older kernels: "n/a"), and each GPU's used and
// total memory (cuMemGetInfo, which needs the device's primary context: the
// monitor retains it, and the context itself takes some GPU memory). With
// no GPU it says so once on stderr.
//
// On a terminal the sample is redrawn in place; otherwise (a pipe, a file,
// or --json) every sample is printed as one line, followed by a WARNING
// line when MemAvailable nears the floor.
type monitorCmd struct {
	Interval  time.Duration `default:"1s" help:"Time between samples."`
	Once      bool          `help:"Print one sample and exit (same as --count 1)."`
	Count     int           `default:"0" help:"Stop after this many samples; 0: run until interrupted."`
	PID       int           `name:"pid" placeholder:"PID" help:"Also show this process's locked (VmLck) and pinned (VmPin) memory, and its RLIMIT_MEMLOCK."`
	WarnBelow string        `default:"3%" placeholder:"BYTES|N%" help:"Floor for MemAvailable, in bytes (64MiB, 2GiB) or percent of MemTotal; the default, 3%, is the pool's guard (pinpool.Options.MinAvailable). A WARNING is printed when MemAvailable is below twice the floor; 0 turns warnings off."`
	JSON      bool          `short:"j" help:"Print one JSON object per sample, one per line."`

	cgroup    *hostmem.CgroupReader // this process's cgroup, opened once by Run; nil: none to read
	cgroupErr error                 // why the cgroup could not be opened: every sample says so
}

// cgroupRoot is where monitor looks for /proc/self and the cgroup files:
// "/", or a recorded tree in the tests.
var cgroupRoot = "/"

// Validate checks the flags; kong reports its error as a usage error.
func (c *monitorCmd) Validate(kctx *kong.Context) error {
	a := flagValues(kctx.Args)
	for _, err := range []error{
		a.checkDuration("interval", c.Interval, 0, true),
		a.checkInt("count", c.Count, 0, maxFlagInt),
		a.checkInt("pid", c.PID, 0, maxFlagInt),
	} {
		if err != nil {
			return err
		}
	}
	if c.Once && c.Count > 1 {
		return fmt.Errorf("--once and --count %d contradict each other", c.Count)
	}
	_, _, err := parseFloor(c.WarnBelow)
	return err
}

// parseFloor parses --warn-below: "N%" of MemTotal (0 <= N <= 100), or a
// byte count.
func parseFloor(s string) (bytes int64, percent float64, err error) {
	if p, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v < 0 || v > 100 || math.IsNaN(v) {
			return 0, 0, &flagError{Flag: "warn-below", Value: s, Want: "a percentage from 0% to 100%, or a byte count such as 64MiB"}
		}
		return 0, v, nil
	}
	n, err := parseBytes(s)
	if err != nil {
		return 0, 0, &flagError{Flag: "warn-below", Value: s, Want: "a percentage from 0% to 100%, or a byte count such as 64MiB"}
	}
	return n, 0, nil
}

// monitorSample is one sample; it is also the --json schema (one object a
// line).
type monitorSample struct {
	Time time.Time `json:"time"`
	hostmem.MemInfo
	Floor       uint64 `json:"floor_bytes"`               // --warn-below in bytes; 0: no warnings
	MemlockSoft uint64 `json:"rlimit_memlock_soft_bytes"` // of --pid, else of the monitor; 18446744073709551615 = unlimited
	MemlockHard uint64 `json:"rlimit_memlock_hard_bytes"`
	Warning     string `json:"warning,omitempty"`

	Process *processSample        `json:"process,omitempty"` // with --pid
	GPUs    []gpuSample           `json:"gpus,omitempty"`
	Cgroup  *hostmem.CgroupMemory `json:"cgroup,omitempty"` // of the monitor's own cgroup (pinned memory counts against it)
	// CgroupError says why the cgroup could not be read this time (Cgroup
	// is then nil); the monitor goes on and reads it again next time.
	CgroupError string `json:"cgroup_error,omitempty"`
}

// processSample is what /proc/PID/status says about locked memory.
type processSample struct {
	PID   int     `json:"pid"`
	Name  string  `json:"name"`
	VmLck *uint64 `json:"vmlck_bytes"` // null when the kernel reports none (kernel threads)
	VmPin *uint64 `json:"vmpin_bytes"` // null when the kernel reports none (before Linux 3.x, ...)
}

// gpuSample is one device's memory (cuMemGetInfo).
type gpuSample struct {
	Device int    `json:"device"`
	Used   uint64 `json:"used_bytes"`
	Total  uint64 `json:"total_bytes"`
}

// Run samples until --count (or --once) is reached, or forever.
func (c *monitorCmd) Run(g *globals) error {
	floorBytes, floorPercent, err := parseFloor(c.WarnBelow)
	if err != nil {
		return err
	}
	if c.PID > 0 { // a clear error before anything is printed
		if _, err := readProcess(c.PID); err != nil {
			return err
		}
	}
	noGPU, err := probeGPU()
	if err != nil {
		return err
	}
	var gpus []*cuda.Context
	if noGPU != "" {
		fmt.Fprintf(g.stderr, "no GPU (%s): showing host memory only\n", noGPU)
	} else {
		n, err := cuda.DeviceCount()
		if err != nil {
			return err
		}
		for i := range n {
			ctx, err := cuda.NewContext(i)
			if err != nil {
				return fmt.Errorf("device %d: %w", i, err)
			}
			defer ctx.Close()
			gpus = append(gpus, ctx)
		}
	}

	if r, err := hostmem.NewCgroupReader(cgroupRoot); err == nil {
		c.cgroup = r
		defer r.Close()
	} else {
		c.cgroupErr = err // shown as "unreadable" in every sample, as info does
	}
	err = c.loop(g.ctx, g.stdout, gpus, floorBytes, floorPercent, !c.JSON && isTerminal(g.stdout))
	if c.Count == 0 && !c.Once {
		// Run until interrupted: Ctrl-C is how it ends, not a cut-short run.
		g.endsOnInterrupt = true
	} else {
		g.partial = g.ctx.Err() != nil // the samples printed before the interrupt
	}
	return err
}

// loop samples and prints until the count is reached: in place (redrawing
// a block with ANSI cursor movements) or line by line.
func (c *monitorCmd) loop(ctx context.Context, out io.Writer, gpus []*cuda.Context, floorBytes int64, floorPercent float64, inPlace bool) error {
	count := c.Count
	if c.Once {
		count = 1
	}
	var tick *time.Ticker
	drawn := 0 // lines of the block drawn last, on a terminal
	for i := 0; count == 0 || i < count; i++ {
		if i == 1 {
			tick = time.NewTicker(c.Interval)
			defer tick.Stop()
		}
		if i > 0 {
			select {
			case <-tick.C:
			case <-ctx.Done(): // interrupted: what was sampled is printed
				return nil
			}
		}
		s, err := c.sample(gpus, floorBytes, floorPercent)
		if err != nil {
			return err
		}
		switch {
		case c.JSON:
			if err := json.NewEncoder(out).Encode(s); err != nil {
				return err
			}
		case inPlace:
			var b bytes.Buffer
			if err := s.writeBlock(&b, c.Interval); err != nil {
				return err
			}
			// Back to the block's first line and clear below, then draw
			// with auto-wrap off, so that a line wider than the terminal
			// is cut instead of taking two rows the next redraw would
			// not go back over.
			var frame bytes.Buffer
			if drawn > 0 {
				fmt.Fprintf(&frame, "\033[%dA\r\033[J", drawn)
			}
			frame.WriteString("\033[?7l")
			frame.Write(b.Bytes())
			frame.WriteString("\033[?7h")
			drawn = bytes.Count(b.Bytes(), []byte("\n"))
			if _, err := out.Write(frame.Bytes()); err != nil {
				return err
			}
		default:
			if _, err := io.WriteString(out, s.line()); err != nil {
				return err
			}
		}
	}
	return nil
}

// sample reads everything once.
func (c *monitorCmd) sample(gpus []*cuda.Context, floorBytes int64, floorPercent float64) (*monitorSample, error) {
	s := &monitorSample{Time: time.Now()}
	var err error
	if s.MemInfo, err = hostmem.ReadMemInfo(); err != nil {
		return nil, err
	}
	s.Floor = uint64(floorBytes)
	if floorPercent > 0 {
		s.Floor = uint64(float64(s.Total) * floorPercent / 100)
	}
	s.Warning = memWarning(s.MemInfo, s.Floor)
	switch {
	case c.cgroupErr != nil:
		s.CgroupError = c.cgroupErr.Error()
	case c.cgroup != nil:
		if cg, err := c.cgroup.Read(); err != nil {
			s.CgroupError = err.Error()
		} else {
			s.Cgroup = &cg
			if s.Warning == "" {
				s.Warning = cgroupWarning(cg, floorBytes, floorPercent)
			}
		}
	}
	if c.PID > 0 {
		if s.Process, err = readProcess(c.PID); err != nil {
			return nil, err
		}
		if s.MemlockSoft, s.MemlockHard, err = readLockLimit(c.PID); err != nil {
			return nil, err
		}
	} else if s.MemlockSoft, s.MemlockHard, err = hostmem.LockLimit(); err != nil {
		return nil, err
	}
	for i, ctx := range gpus {
		free, total, err := ctx.MemGetInfo()
		if err != nil {
			return nil, fmt.Errorf("device %d: %w", i, err)
		}
		s.GPUs = append(s.GPUs, gpuSample{Device: i, Used: total - min(free, total), Total: total})
	}
	return s, nil
}

// memWarning returns the warning for MemAvailable against floor: below it
// pools refuse to grow, and below twice the floor it is near. "" when all
// is well or floor is 0.
func memWarning(m hostmem.MemInfo, floor uint64) string {
	const why = "locked memory cannot be swapped out; a host that runs out of memory freezes"
	switch {
	case floor == 0 || m.Available >= 2*floor:
		return ""
	case m.Available < floor:
		return fmt.Sprintf("MemAvailable %s is below the floor %s: pinpool pools refuse to grow (%s)",
			units.Limit(m.Available), units.Limit(floor), why)
	}
	return fmt.Sprintf("MemAvailable %s is near the floor %s (%s above it): below it pinpool pools refuse to grow (%s)",
		units.Limit(m.Available), units.Limit(floor), units.Limit(m.Available-floor), why)
}

// cgroupWarning is memWarning for the cgroup's headroom: the floor is
// --warn-below in bytes, or its percentage of the cgroup's limit (as the
// pool's guard does). "" with no limit or no floor.
func cgroupWarning(cg hostmem.CgroupMemory, floorBytes int64, floorPercent float64) string {
	if cg.Limit <= 0 {
		return ""
	}
	floor := floorBytes
	if floorPercent > 0 {
		floor = int64(float64(cg.Limit) * floorPercent / 100)
	}
	room := cg.Headroom()
	switch {
	case floor <= 0 || room >= 2*floor:
		return ""
	case room < floor:
		return fmt.Sprintf("cgroup headroom %s is below the floor %s: pinpool pools refuse to grow; %s",
			units.Size(room), units.Size(floor), hostmem.RaiseCgroupLimitHint)
	}
	return fmt.Sprintf("cgroup headroom %s is near the floor %s: past the limit the kernel kills the process",
		units.Size(room), units.Size(floor))
}

// line is the sample as one line of text (plus a WARNING line when there is
// a warning), for pipes and files.
func (s *monitorSample) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s MemAvailable %s of %s, Mlocked %s, RLIMIT_MEMLOCK %s/%s",
		s.Time.Format("2006-01-02T15:04:05.000"), units.Limit(s.Available), units.Limit(s.Total),
		units.Limit(s.Mlocked), units.Limit(s.MemlockSoft), units.Limit(s.MemlockHard))
	if p := s.Process; p != nil {
		fmt.Fprintf(&b, "; pid %d (%s) VmLck %s, VmPin %s", p.PID, p.Name, optBytes(p.VmLck), optBytes(p.VmPin))
	}
	for _, g := range s.GPUs {
		fmt.Fprintf(&b, "; GPU %d used %s of %s", g.Device, units.Limit(g.Used), units.Limit(g.Total))
	}
	if cg := s.Cgroup; cg != nil && cg.Limit > 0 {
		fmt.Fprintf(&b, "; cgroup %s, headroom %s", units.Size(cg.Limit), units.Size(cg.Headroom()))
	} else if s.CgroupError != "" {
		fmt.Fprintf(&b, "; cgroup unreadable: %s", s.CgroupError)
	}
	// A sample with a process, several GPUs and a cgroup is longer than a
	// line may be: it continues on lines indented under the time.
	line := textwrap.Wrap(b.String(), textwrap.Width, "                        ") + "\n"
	if s.Warning != "" {
		line += textwrap.Wrap("WARNING: "+s.Warning, textwrap.Width, "         ") + "\n"
	}
	return line
}

// writeBlock writes the sample as a small table, for a terminal.
func (s *monitorSample) writeBlock(w io.Writer, every time.Duration) error {
	fmt.Fprintf(w, "pinpool monitor, %s, every %v (Ctrl-C to stop)\n", s.Time.Format("2006-01-02 15:04:05"), every)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	floor := "off"
	if s.Floor > 0 {
		floor = units.Limit(s.Floor)
	}
	fmt.Fprintf(tw, "host memory:\ttotal %s, available %s (floor %s), locked system-wide (Mlocked) %s\n",
		units.Limit(s.Total), units.Limit(s.Available), floor, units.Limit(s.Mlocked))
	who := "this process"
	if s.Process != nil {
		who = fmt.Sprintf("pid %d", s.Process.PID)
	}
	fmt.Fprintf(tw, "RLIMIT_MEMLOCK:\tsoft %s, hard %s (%s)\n", units.Limit(s.MemlockSoft), units.Limit(s.MemlockHard), who)
	if p := s.Process; p != nil {
		fmt.Fprintf(tw, "pid %d (%s):\tlocked (VmLck) %s, pinned (VmPin) %s\n", p.PID, p.Name, optBytes(p.VmLck), optBytes(p.VmPin))
	}
	for _, g := range s.GPUs {
		fmt.Fprintf(tw, "GPU %d:\tused %s of %s\n", g.Device, units.Limit(g.Used), units.Limit(g.Total))
	}
	if s.Cgroup != nil {
		fmt.Fprintf(tw, "cgroup:\t%s\n", s.Cgroup)
	} else if s.CgroupError != "" {
		fmt.Fprintf(tw, "cgroup:\t%s\n", cgroupLine(nil, s.CgroupError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if s.Warning != "" {
		fmt.Fprintf(w, "WARNING: %s\n", s.Warning)
	}
	return nil
}

// optBytes renders a byte count the kernel may not report.
func optBytes(v *uint64) string {
	if v == nil {
		return "n/a"
	}
	return units.Limit(*v)
}

// readProcess reads the locked-memory lines of /proc/PID/status.
func readProcess(pid int) (*processSample, error) {
	path := fmt.Sprintf("/proc/%d/status", pid)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no process with pid %d (%s does not exist)", pid, path)
	}
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	return parseProcStatus(pid, b)
}

// parseProcStatus parses a /proc/PID/status text: Name, and VmLck and VmPin
// in kB (either may be missing).
func parseProcStatus(pid int, b []byte) (*processSample, error) {
	p := &processSample{PID: pid}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst **uint64
		switch key {
		case "Name":
			p.Name = strings.TrimSpace(val)
			continue
		case "VmLck":
			dst = &p.VmLck
		case "VmPin":
			dst = &p.VmPin
		default:
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 || len(f) > 2 || len(f) == 2 && f[1] != "kB" {
			return nil, fmt.Errorf("pid %d: status line %q: want a number of kB", pid, sc.Text())
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || kb > math.MaxUint64/1024 {
			return nil, fmt.Errorf("pid %d: status line %q: bad number", pid, sc.Text())
		}
		v := kb * 1024
		*dst = &v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	return p, nil
}

// readLockLimit reads RLIMIT_MEMLOCK of process pid from /proc/PID/limits;
// math.MaxUint64 means unlimited.
func readLockLimit(pid int) (soft, hard uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return parseLockLimit(b)
}

// parseLockLimit finds "Max locked memory  SOFT  HARD  bytes" in a
// /proc/PID/limits text.
func parseLockLimit(b []byte) (soft, hard uint64, err error) {
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Max locked memory")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			break
		}
		v := [2]uint64{}
		for i := range v {
			if f[i] == "unlimited" {
				v[i] = math.MaxUint64
			} else if v[i], err = strconv.ParseUint(f[i], 10, 64); err != nil {
				return 0, 0, fmt.Errorf("limits line %q: %w", line, err)
			}
		}
		return v[0], v[1], nil
	}
	return 0, 0, errors.New("no \"Max locked memory\" line in the process's limits")
}
