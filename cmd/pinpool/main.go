// Command pinpool inspects and measures pinned (page-locked) host memory on
// this machine: what the GPU driver and the kernel allow (info), how fast
// each kind of memory moves data and what allocation costs (bench), which
// memory to use for which data here (advise), a pool under the workload of
// the C++ article pinpool starts from, beside a mutex-and-list pool (stress),
// and locked memory over time (monitor).
//
// Usage:
//
//	pinpool info [--json]
//	pinpool bench [--sizes 4KiB,1MiB,... | --max-size 1GiB] [--kinds pinned,staged,...] [--directions H2D,D2H,both] [--json | --csv | --gobench] [--plot FILE.png|.svg]
//	pinpool advise [--from bench.json | --full] [--json]
//	pinpool stress [--goroutines 10] [--iterations 100] [--size 3110400] [--sleep-scale 1] [--warmup N] [--reserve] [--budget BYTES] [--wait D] [--[no-]exact] [--compare-raw] [--compare-seed] [--metrics-addr HOST:PORT] [--json]
//	pinpool arena [--sizes 4GiB,...] [--ways pool:blocks=2MiB,pool,hostalloc-raw,...] [--json]
//	pinpool monitor [--interval 1s] [--once | --count N] [--pid PID] [--warn-below 3%] [--json]
//	pinpool version [--json]
//	pinpool --version
//
// Install it with
//
//	go install github.com/pinpool/pinpool/cmd/pinpool@latest
//
// "pinpool help COMMAND" is "pinpool COMMAND --help"; -h is --help and -j
// is --json.
//
// Exit status (see exitStatusHelp): 0 when the command measured or showed
// what was asked, 1 on a failure (including a run that measured nothing of
// what was asked), 2 on a usage error, 130 when interrupted (Ctrl-C,
// SIGTERM; partial results are printed and marked partial; monitor, which
// runs until interrupted, exits 0 then). No GPU is not
// a failure for a command that was not asked for one: the tool says so in
// one line and reports the host side.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/pinpool/pinpool/cmd/pinpool/internal/textwrap"
)

// cli is the command line: one field per subcommand, each in its own file.
type cli struct {
	Info    infoCmd    `cmd:"" help:"Show the CUDA driver, each device's pinned-memory attributes, and the host's locked-memory limits."`
	Stress  stressCmd  `cmd:"" help:"Run a pool test (goroutines getting and releasing video frames) on pinpool's pool, optionally against raw allocation and a mutex-and-list pool (the common C++ design)."`
	Bench   benchCmd   `cmd:"" help:"Measure transfers for every kind of host memory, direction and size, the cost of allocating pinned memory, and the pool against a mutex-and-list pool (the common C++ design)."`
	Advise  adviseCmd  `cmd:"" help:"Measure briefly (or read a saved 'bench --json' report) and say which memory to use for which data on this machine, with the figures behind each line."`
	Arena   arenaCmd   `cmd:"" help:"Reserve a large pinned arena several ways, timing each, a neighbour's copies meanwhile, and the free."`
	Monitor monitorCmd `cmd:"" help:"Watch locked and pinned memory: /proc/meminfo, a process's VmLck and VmPin, RLIMIT_MEMLOCK, GPU memory."`
	Version versionCmd `cmd:"" help:"Show the module version, VCS revision and time, Go version and platform of this binary."`

	VersionFlag kong.VersionFlag `name:"version" help:"Print the version line and exit."`
}

// globals are passed to every subcommand's Run.
type globals struct {
	// ctx ends on an interrupt (Ctrl-C, SIGTERM): every command then stops
	// its work, prints what it measured, and the tool exits 130.
	ctx            context.Context
	stdout, stderr io.Writer
	args           []string // the command line after the program name
	// partial is set by a command that printed results before an
	// interrupt stopped it, so that the last line says they are partial.
	partial bool
	// endsOnInterrupt is set by a command that runs until interrupted
	// (monitor with no --count): the interrupt is its end, and the tool
	// exits 0 with nothing said about it.
	endsOnInterrupt bool
}

// exitStatusHelp is the part of `pinpool --help` that documents the exit
// status.
const exitStatusHelp = `Exit status: 0 the command measured (or showed) what was asked; 1 failure, ` +
	`including a run that measured nothing of what was asked; 2 usage error; ` +
	`130 interrupted (Ctrl-C or SIGTERM: what was measured is printed, marked partial); ` +
	`monitor, which runs until interrupted unless given --count, ends on Ctrl-C with 0.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// exitInterrupted is the exit status after an interrupt (128 + SIGINT), as
// shells report a command that Ctrl-C stopped.
const exitInterrupted = 130

// run parses args and runs the subcommand, returning the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run with the context that an interrupt ends: the command
// prints what it measured, and the status is exitInterrupted.
func runContext(ictx context.Context, args []string, stdout, stderr io.Writer) int {
	var c cli
	exit := -1
	parser, err := kong.New(&c,
		kong.Name("pinpool"),
		kong.Description("Pinned host memory for CUDA: inspect, measure, advise. "+
			"'pinpool help COMMAND' shows a command's flags.\n\n"+exitStatusHelp),
		kong.Writers(stdout, stderr),
		// Help wraps to the terminal, never wider than the tool's lines.
		kong.ConfigureHelp(kong.HelpOptions{WrapUpperBound: textwrap.Width}),
		kong.Exit(func(code int) { exit = code }),
		kong.Vars{"version": currentVersion().String()},
	)
	if err != nil {
		fmt.Fprintln(stderr, "pinpool:", err)
		return 1
	}
	ctx, err := parser.Parse(normalizeArgs(args))
	if exit >= 0 { // --help, --version
		return exit
	}
	if err != nil {
		fmt.Fprintln(stderr, errorText(usageMessage(err)))
		printUsageTo(stderr, err)
		return 2
	}
	g := &globals{ctx: ictx, stdout: stdout, stderr: stderr, args: args}
	err = ctx.Run(g)
	if ictx.Err() != nil && g.endsOnInterrupt && errors.Is(err, context.Canceled) {
		err = nil
	}
	if ictx.Err() != nil && !g.endsOnInterrupt {
		if err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, errorText(err.Error()))
		}
		if g.partial {
			fmt.Fprintln(stderr, "pinpool: interrupted; the results above are partial")
		} else {
			fmt.Fprintln(stderr, "pinpool: interrupted before anything was measured")
		}
		return exitInterrupted
	}
	if err != nil {
		fmt.Fprintln(stderr, errorText(err.Error()))
		return 1
	}
	return 0
}

// errorText is the tool's line for an error message: "pinpool: " once,
// though the library's messages start with their own and a command may
// wrap one in its flag's name ("--reserve: pinpool: ..."), wrapped to
// textwrap.Width with the lines after the first indented.
func errorText(msg string) string {
	msg = strings.TrimPrefix(msg, "pinpool: ")
	msg = strings.ReplaceAll(msg, ": pinpool: ", ": ")
	return textwrap.Wrap("pinpool: "+msg, textwrap.Width, "  ")
}
