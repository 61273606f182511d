package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/pinpool/pinpool/cmd/pinpool/internal/advise"
	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// adviseCmd is `pinpool advise`: a short measurement (measure.QuickPlan:
// sizes up to 64 MiB, fewer repeats) or a saved `pinpool bench --json`
// report, turned into recommendations for this machine by the rules of
// package internal/advise, each line with the figures it rests on.
type adviseCmd struct {
	args []string // the command line, to tell a flag given from its default (set by Validate)

	From     string     `placeholder:"FILE" help:"Advise from a report saved with 'pinpool bench --json' instead of measuring ('-': stdin)."`
	Full     bool       `help:"Measure with bench's full plan (sizes up to 1 GiB) instead of the short one."`
	JSON     bool       `short:"j" help:"Print the advice as JSON."`
	Progress string     `default:"auto" help:"Progress bar on stderr while measuring: auto (when stderr is a terminal), always, never."`
	Device   deviceFlag `default:"0" placeholder:"N" help:"CUDA device to measure and advise on (giving it without a GPU is an error)."`
}

// Validate checks the flags; kong reports its error as a usage error.
func (c *adviseCmd) Validate(kctx *kong.Context) error {
	a := flagValues(kctx.Args)
	c.args = kctx.Args
	c.Progress = strings.ToLower(c.Progress)
	if err := a.checkEnum("progress", c.Progress, "auto", "always", "never"); err != nil {
		return err
	}
	if c.Device.all || len(c.Device.list) > 1 {
		return &flagError{Flag: "device", Value: strings.Join(a.typed("device"), ","),
			Want: "one device number: advise is for one device (bench --device measures several)"}
	}
	if c.From != "" && c.Full {
		return errors.New("--from and --full: advise either from a saved report or from a new measurement")
	}
	if c.From != "" && flagsGiven(c.args)["device"] {
		return fmt.Errorf("--from %s advises from a saved report and measures nothing: --device has no use with it", c.From)
	}
	return nil
}

// Run measures (or reads the report) and prints the advice. Interrupted
// while measuring, it prints no advice: advice from a partial measurement
// would lack the rows its rules compare.
func (c *adviseCmd) Run(g *globals) error {
	var r *measure.Report
	if c.From != "" {
		var err error
		if r, err = readReport(c.From); err != nil {
			return err
		}
	} else {
		plan := quickPlan()
		if c.Full {
			plan = measure.DefaultPlan()
		}
		if err := needGPU(c.args, "device"); err != nil {
			return err
		}
		devices, err := c.Device.resolve()
		if err != nil {
			return err
		}
		plan.Devices = devices[:1]
		r, err = measureWithProgress(g, plan, c.Progress)
		if g.ctx.Err() != nil {
			return errors.New("advise: interrupted while measuring: no advice")
		}
		if err != nil {
			return fmt.Errorf("advise: measuring: %w", err)
		}
	}
	if r.IsNoGPU() {
		fmt.Fprintf(g.stderr, "no GPU (%s): advice for the host side only\n", r.Machine.NoGPU)
	}
	a := advise.Advise(r)
	if c.JSON {
		return advise.WriteJSON(g.stdout, a)
	}
	fmt.Fprintf(g.stdout, "Advice for %s, measured %s\n", machineLine(r.Machine), r.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(g.stdout, "(%s)\n\n", r.Command)
	return advise.Write(g.stdout, a)
}

// quickPlan is the plan advise measures without --full; a variable so that
// the tests can measure less.
var quickPlan = measure.QuickPlan

// readReport reads a `pinpool bench --json` report from path ("-": stdin).
func readReport(path string) (*measure.Report, error) {
	f := os.Stdin
	if path != "-" {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, fmt.Errorf("--from: %w", err)
		}
		defer f.Close()
	}
	var r measure.Report
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("--from %s: not a 'pinpool bench --json' report: %w", path, err)
	}
	if off := dec.InputOffset(); dec.More() {
		return nil, fmt.Errorf("--from %s: more than one report: something follows the report at byte %d", path, off)
	} else if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("--from %s: something that is not JSON follows the report at byte %d", path, off)
	}
	if r.Empty() {
		return nil, fmt.Errorf("--from %s: the report holds no measurement", path)
	}
	return &r, nil
}

// machineLine names the machine in one phrase: the GPU, or the host
// without one.
func machineLine(m measure.Machine) string {
	if m.GPU != "" {
		return fmt.Sprintf("%s (driver %s) on %s", m.GPU, m.Driver, m.Hostname)
	}
	return fmt.Sprintf("%s without a GPU", m.Hostname)
}
