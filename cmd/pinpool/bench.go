package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
	"github.com/pinpool/pinpool/cmd/pinpool/internal/report"
	"github.com/schollz/progressbar/v3"
)

// benchCmd is `pinpool bench`: the bandwidthTest of pinned host memory.
// It measures transfers for every kind of host memory, direction and size,
// the cost of allocating pinned memory, and the pool's Get+Release
// throughput against a mutex-and-list pool, the common C++ design
// (package internal/measure), and
// prints them as a table, JSON, CSV or Go benchmark format, with an
// optional plot.
type benchCmd struct {
	args    []string // the command line, to tell a flag given from its default (set by Validate)
	devices []int    // --device resolved (set by Validate)

	Sizes      []byteSize `sep:"," placeholder:"SIZE" help:"Transfer sizes (default: 4KiB to --max-size in steps of 4×)."`
	MaxSize    byteSize   `default:"1GiB" help:"Largest transfer of the default sizes."`
	Kinds      []string   `sep:"," placeholder:"KIND" help:"Memory kinds: pageable, pinned, write-combined, registered, mapped, staged, batch (default: all; batch needs a CUDA 12.8 driver). Giving it without a GPU is an error."`
	Directions []string   `sep:"," placeholder:"DIR" help:"Directions: H2D, D2H, both (default: all)."`

	Repeats     int           `default:"10" help:"Fewest timed transfers per row; rows repeat until --min-time too (the figure is the median). Also the samples of every row and pool point in --gobench (benchstat wants 6 or more)."`
	MinTime     time.Duration `default:"50ms" help:"Least total time of a row's timed transfers."`
	Warmup      int           `default:"2" help:"Untimed transfers before each row."`
	Rotate      byteSize      `default:"512MiB" help:"Least memory a row's transfers cycle through, so small ones do not run from caches."`
	AllocSizes  []byteSize    `sep:"," placeholder:"SIZE" help:"Sizes of the allocation benchmark (default 4KiB,64KiB,1MiB,16MiB,256MiB)."`
	AllocCalls  int           `default:"10" help:"Calls per allocation size (from 64MiB a third of it, at least 6, for benchstat)."`
	Goroutines  []int         `sep:"," placeholder:"N" help:"Goroutine counts of the pool benchmark (default 1,2,4,... up to the CPUs)."`
	PoolSize    byteSize      `default:"64KiB" help:"Buffer size of the pool benchmark."`
	PoolTime    time.Duration `default:"200ms" help:"Run time of each pool benchmark point."`
	NoTransfers bool          `help:"Skip the transfer benchmark."`
	NoAlloc     bool          `help:"Skip the allocation benchmark."`
	NoPool      bool          `help:"Skip the pool benchmark."`
	Device      deviceFlag    `default:"0" placeholder:"N|N,M|all" help:"Devices to measure: a number, a list, or all (CUDA_VISIBLE_DEVICES chooses which the driver shows); with several, each alone and then the pinned and staged transfers on all at once. Giving it without a GPU is an error."`
	CopySizes   []byteSize    `sep:"," placeholder:"SIZE" help:"Sizes of the host memory copy benchmark, the ceiling of staging (default 64KiB,1MiB,16MiB,256MiB); its goroutines are --goroutines."`
	NoHostCopy  bool          `help:"Skip the host memory copy benchmark."`
	FileSize    byteSize      `name:"file-size" placeholder:"SIZE" help:"Also move a temporary file of SIZE (in --file-dir) to the GPU and back, warm and cold, beside os.ReadFile plus the driver's copy. Giving it without a GPU is an error."`
	FileDir     string        `name:"file-dir" placeholder:"DIR" help:"Where the --file-size file is made (default: the temporary directory; use the disk your data is on)."`

	JSON     bool   `short:"j" xor:"format" help:"Print the report as JSON."`
	CSV      bool   `xor:"format" help:"Print the report as CSV (one header, a row per measurement)."`
	GoBench  bool   `name:"gobench" xor:"format" help:"Print the Go benchmark format (for benchstat)."`
	Plot     string `placeholder:"FILE" help:"Also draw bandwidth against size for every kind into FILE (.png or .svg)."`
	Progress string `default:"auto" help:"Progress bar on stderr: auto (when stderr is a terminal), always, never."`
	From     string `placeholder:"FILE" help:"Measure nothing: render a report saved with --json ('-': stdin) in the format asked, and --plot it."`
}

// Validate checks the flags before anything is measured; kong reports
// its error as a usage error. Every value is checked against its range and
// refused in one shape (flagError: the flag, the value as typed, what it
// wants, in the user's units), contradictions are refused, and the --plot
// file is opened, so that a bad path does not throw a measurement away.
func (c *benchCmd) Validate(kctx *kong.Context) error {
	c.args = kctx.Args
	a := flagValues(c.args)
	c.Progress = strings.ToLower(c.Progress)
	if err := a.checkEnum("progress", c.Progress, "auto", "always", "never"); err != nil {
		return err
	}
	for i, k := range c.Kinds {
		kind, err := measure.ParseKind(strings.ToLower(k))
		if err != nil {
			return &flagError{Flag: "kinds", Value: a.value("kinds", i, k), Want: "one of " + joinKinds()}
		}
		c.Kinds[i] = string(kind)
	}
	for i, d := range c.Directions {
		if _, err := measure.ParseDirection(strings.ToLower(d)); err != nil {
			return &flagError{Flag: "directions", Value: a.value("directions", i, d), Want: "H2D, D2H or both"}
		}
	}
	if err := c.checkValues(a); err != nil {
		return err
	}
	if err := c.checkContradictions(); err != nil {
		return err
	}
	if c.Plot != "" {
		switch strings.ToLower(filepath.Ext(c.Plot)) {
		case ".png", ".svg":
		default:
			return &flagError{Flag: "plot", Value: c.Plot, Want: "a .png or .svg file"}
		}
		if err := checkWritable("plot", c.Plot, filepath.Dir(c.Plot), "a file in a folder this user can write"); err != nil {
			return err
		}
	}
	devices, err := c.Device.resolve()
	if err != nil {
		return err
	}
	c.devices = devices
	_, err = c.plan().WithDefaults()
	return err
}

// checkValues checks every numeric flag against its range.
func (c *benchCmd) checkValues(a flagValues) error {
	const maxTransfer = measure.MaxTransferSize
	for _, err := range []error{
		a.checkSizes("max-size", []byteSize{c.MaxSize}, 1, maxTransfer),
		a.checkSizes("sizes", c.Sizes, 1, maxTransfer),
		a.checkSizes("alloc-sizes", c.AllocSizes, 1, maxTransfer),
		a.checkSizes("copy-sizes", c.CopySizes, 1, 4<<30),
		a.checkSizes("pool-size", []byteSize{c.PoolSize}, 1, 1<<30),
		a.checkSizes("rotate", []byteSize{c.Rotate}, 1, maxTransfer),
		a.checkInt("repeats", c.Repeats, 1, maxFlagInt),
		a.checkInt("warmup", c.Warmup, 0, maxFlagInt),
		a.checkInt("alloc-calls", c.AllocCalls, 1, maxFlagInt),
		a.checkInts("goroutines", c.Goroutines, 1, 1<<16),
		a.checkDuration("min-time", c.MinTime, 0, false),
		a.checkDuration("pool-time", c.PoolTime, 0, true),
	} {
		if err != nil {
			return err
		}
	}
	if c.FileSize != 0 {
		if err := a.checkSizes("file-size", []byteSize{c.FileSize}, 1, maxTransfer); err != nil {
			return err
		}
	}
	if c.FileDir != "" && c.FileSize == 0 {
		return &flagError{Flag: "file-dir", Value: c.FileDir, Want: "--file-size too: it is where the --file-size file goes"}
	}
	if c.FileSize != 0 {
		return checkFileDir(c.FileDir)
	}
	return nil
}

// checkFileDir makes sure the --file-size file can be made in dir (the
// temporary directory when dir is ""), before anything is measured.
func checkFileDir(dir string) error {
	const want = "a folder this user can write"
	shown := dir
	if dir == "" {
		dir = os.TempDir()
		shown = dir + " (the temporary directory; --file-dir chooses another)"
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return &flagError{Flag: "file-dir", Value: shown, Want: fmt.Sprintf("%s (%v)", want, errors.Unwrap(err))}
	case !fi.IsDir():
		return &flagError{Flag: "file-dir", Value: shown, Want: want + " (it is not a folder)"}
	}
	return checkWritable("file-dir", shown, dir, want)
}

// checkContradictions refuses flags that cannot go together.
func (c *benchCmd) checkContradictions() error {
	given := flagsGiven(c.args)
	if c.From != "" {
		for _, f := range []string{"sizes", "max-size", "kinds", "directions", "repeats", "min-time", "warmup", "rotate",
			"alloc-sizes", "alloc-calls", "goroutines", "pool-size", "pool-time", "no-transfers", "no-alloc", "no-pool",
			"copy-sizes", "no-host-copy", "progress", "device", "file-size", "file-dir"} {
			if given[f] {
				return fmt.Errorf("--from %s renders a saved report and measures nothing: --%s has no use with it", c.From, f)
			}
		}
	}
	if given["sizes"] && given["max-size"] {
		return fmt.Errorf("--sizes and --max-size both choose the transfer sizes: give one")
	}
	if c.NoTransfers && c.NoAlloc && c.NoPool && c.NoHostCopy && c.FileSize == 0 {
		return fmt.Errorf("--no-transfers, --no-alloc, --no-pool and --no-host-copy together leave nothing to measure")
	}
	return nil
}

// flagsGiven returns the long flags present on a command line.
func flagsGiven(args []string) map[string]bool {
	given := map[string]bool{}
	for _, a := range args {
		if name, ok := strings.CutPrefix(a, "--"); ok && name != "" {
			name, _, _ = strings.Cut(name, "=")
			given[name] = true
		}
	}
	return given
}

// checkWritable makes sure a file can be made in dir, before a long run:
// it creates (and removes) one there. The error names --flag with value
// and says what it wants.
func checkWritable(flag, value, dir, want string) error {
	f, err := os.CreateTemp(dir, ".pinpool-"+flag+"-*")
	if err != nil {
		return &flagError{Flag: flag, Value: value, Want: fmt.Sprintf("%s (%v)", want, errors.Unwrap(err))}
	}
	f.Close()
	return os.Remove(f.Name())
}

// joinKinds lists the memory kinds for a message.
func joinKinds() string {
	var ks []string
	for _, k := range measure.Kinds {
		ks = append(ks, string(k))
	}
	return strings.Join(ks, ", ")
}

// plan turns the flags into a measurement plan.
func (c *benchCmd) plan() measure.Plan {
	p := measure.Plan{
		MinRepeats: c.Repeats, MinTime: c.MinTime, Warmup: c.Warmup, RotateBytes: int64(c.Rotate),
		AllocRepeats: c.AllocCalls, PoolSize: int64(c.PoolSize), PoolTime: c.PoolTime,
		NoTransfers: c.NoTransfers, NoAlloc: c.NoAlloc, NoPool: c.NoPool, NoHostCopy: c.NoHostCopy,
		PoolGoroutines: c.Goroutines, Devices: c.devices,
		FileSize: int64(c.FileSize), FileDir: c.FileDir,
	}
	if len(c.CopySizes) > 0 {
		p.CopySizes = toInt64(c.CopySizes)
	}
	if p.Warmup == 0 {
		p.Warmup = -1 // measure.Plan: 0 means the default; the flag's 0 means none
	}
	if len(c.Sizes) > 0 {
		p.Sizes = toInt64(c.Sizes)
	} else {
		for s := int64(4 << 10); s <= int64(c.MaxSize); s *= 4 {
			p.Sizes = append(p.Sizes, s)
		}
		if p.Sizes == nil {
			p.Sizes = []int64{int64(c.MaxSize)}
		}
	}
	for _, k := range c.Kinds {
		p.Kinds = append(p.Kinds, measure.Kind(k))
	}
	for _, d := range c.Directions {
		dir, _ := measure.ParseDirection(strings.ToLower(d))
		p.Directions = append(p.Directions, dir)
	}
	if len(c.AllocSizes) > 0 {
		p.AllocSizes = toInt64(c.AllocSizes)
	}
	return p
}

func toInt64(s []byteSize) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// Run measures and prints. Interrupting it (Ctrl-C) stops after the row in
// progress and prints what was measured, marked partial; the tool then
// exits 130. A run that measured nothing of what was asked fails: --device
// or --kinds without a GPU (before measuring), a run whose every section
// was skipped, and --plot with nothing to draw.
func (c *benchCmd) Run(g *globals) error {
	var r *measure.Report
	var err error
	if c.From != "" {
		if r, err = readReport(c.From); err != nil {
			return err
		}
	} else {
		flags := []string{"device", "file-size"}
		if !c.NoTransfers {
			flags = append(flags, "kinds")
		}
		if err := needGPU(c.args, flags...); err != nil {
			return err
		}
		r, err = measureWithProgress(g, c.plan(), c.Progress)
	}
	if r == nil {
		return err
	}
	switch {
	case r.Empty() && err != nil:
		return err // stopped before anything was measured: nothing to print
	case r.Empty():
		return fmt.Errorf("bench measured nothing of what was asked: %s", strings.Join(r.Skipped, "; "))
	}
	if r.IsNoGPU() && (c.JSON || c.CSV || c.GoBench) {
		// The table says it in its gpu line; other formats get it here, once.
		fmt.Fprintf(g.stderr, "gpu: none (%s): measured the host side only\n", r.Machine.NoGPU)
	}
	if werr := c.write(g.stdout, r); werr != nil {
		return errors.Join(err, werr)
	}
	g.partial = r.Partial
	if c.Plot != "" {
		switch perr := report.Plot(c.Plot, r); {
		case errors.Is(perr, report.ErrNothingToPlot) && err == nil:
			return fmt.Errorf("--plot %s: nothing that can be plotted was measured (transfers, allocations, "+
				"pool or host copies); the file was not written", c.Plot)
		case errors.Is(perr, report.ErrNothingToPlot):
		case perr != nil:
			return errors.Join(err, perr)
		default:
			fmt.Fprintf(g.stderr, "plot: %s\n", c.Plot)
		}
	}
	if err != nil {
		return fmt.Errorf("bench stopped early: %w", err)
	}
	return nil
}

// write prints r in the format the flags ask for.
func (c *benchCmd) write(w io.Writer, r *measure.Report) error {
	switch {
	case c.JSON:
		return report.WriteJSON(w, r)
	case c.CSV:
		return report.WriteCSV(w, r)
	case c.GoBench:
		return report.WriteGoBench(w, r)
	}
	return report.WriteTable(w, r)
}

// progressBar returns a bar on w when mode is "always", or when it is
// "auto" and w is a terminal (isTerminal); nil otherwise.
func progressBar(w io.Writer, mode string) *progressbar.ProgressBar {
	if mode == "never" || mode == "auto" && !isTerminal(w) {
		return nil
	}
	return progressbar.NewOptions(-1,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("measuring"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}

// measureWithProgress runs plan with a progress bar on stderr (see
// progressBar), stopping early on an interrupt (Ctrl-C) with the report so
// far and an error.
func measureWithProgress(g *globals, plan measure.Plan, mode string) (*measure.Report, error) {
	ctx := g.ctx
	bar := progressBar(g.stderr, mode)
	if bar != nil {
		plan.Progress = func(s measure.Step) {
			bar.ChangeMax(s.Total)
			bar.Describe(s.What)
			_ = bar.Set(s.Done)
		}
	}
	r, err := measure.Run(ctx, plan, "pinpool "+strings.Join(g.args, " "))
	if bar != nil {
		_ = bar.Finish() // clears the bar
	}
	return r, err
}
