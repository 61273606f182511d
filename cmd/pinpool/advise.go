package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pinpool/pinpool/internal/advise"
	"github.com/pinpool/pinpool/internal/measure"
)

// adviseCmd is `pinpool advise`: a short measurement (measure.QuickPlan:
// sizes up to 64 MiB, fewer repeats) or a saved `pinpool bench --json`
// report, turned into recommendations for this machine by the rules of
// package internal/advise, each line with the figures it rests on.
type adviseCmd struct {
	From     string     `placeholder:"FILE" help:"Advise from a report saved with 'pinpool bench --json' instead of measuring ('-': stdin)."`
	Full     bool       `help:"Measure with bench's full plan (sizes up to 1 GiB) instead of the short one."`
	JSON     bool       `help:"Print the advice as JSON."`
	Progress string     `default:"auto" help:"Progress bar on stderr while measuring: auto (when stderr is a terminal), always, never."`
	Device   deviceFlag `default:"0" placeholder:"N" help:"CUDA device to measure and advise on."`
}

// Validate checks the flags; kong reports its error as a usage error.
func (c *adviseCmd) Validate() error {
	c.Progress = strings.ToLower(c.Progress)
	if c.Progress != "auto" && c.Progress != "always" && c.Progress != "never" {
		return fmt.Errorf("--progress %s: want auto, always or never", c.Progress)
	}
	if c.From != "" && c.Full {
		return errors.New("--from and --full: advise either from a saved report or from a new measurement")
	}
	return nil
}

// Run measures (or reads the report) and prints the advice.
func (c *adviseCmd) Run(g *globals) error {
	var r *measure.Report
	if c.From != "" {
		var err error
		if r, err = readReport(c.From); err != nil {
			return err
		}
	} else {
		plan := measure.QuickPlan()
		if c.Full {
			plan = measure.DefaultPlan()
		}
		devices, err := c.Device.resolve()
		if err != nil {
			return err
		}
		plan.Devices = devices[:1]
		if r, err = measureWithProgress(g, plan, c.Progress); err != nil {
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
	fmt.Fprintf(g.stdout, "Advice for %s, measured %s (%s)\n\n", machineLine(r.Machine), r.Date.Format("2006-01-02 15:04 MST"), r.Command)
	return advise.Write(g.stdout, a)
}

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
	if r.Date.IsZero() && len(r.Transfers)+len(r.Allocs)+len(r.Pool) == 0 {
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
