package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pinpool/pinpool/cuda"
)

// deviceFlag is --device: a device ordinal, a comma-separated list of
// them, or "all" (every device the driver shows, which honours
// CUDA_VISIBLE_DEVICES). The zero value is device 0.
type deviceFlag struct {
	all  bool
	list []int
}

// UnmarshalText implements encoding.TextUnmarshaler (used by kong).
func (d *deviceFlag) UnmarshalText(text []byte) error {
	s := strings.ToLower(strings.TrimSpace(string(text)))
	if s == "all" {
		*d = deviceFlag{all: true}
		return nil
	}
	var list []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return badValue(string(text), "a device number from 0, a list of them, or all")
		}
		for _, m := range list {
			if m == n {
				return badValue(string(text), fmt.Sprintf("each device once (%d is given twice)", n))
			}
		}
		list = append(list, n)
	}
	*d = deviceFlag{list: list}
	return nil
}

// String writes the flag as UnmarshalText reads it.
func (d deviceFlag) String() string {
	if d.all {
		return "all"
	}
	var parts []string
	for _, n := range d.ordinals() {
		parts = append(parts, strconv.Itoa(n))
	}
	return strings.Join(parts, ",")
}

func (d deviceFlag) ordinals() []int {
	if len(d.list) == 0 {
		return []int{0}
	}
	return d.list
}

// resolve returns the device ordinals to use: with "all", every device the
// driver shows (device 0 without a driver, so that the host side still
// runs); otherwise the list, checked against the devices there are.
func (d deviceFlag) resolve() ([]int, error) {
	n, err := cuda.DeviceCount()
	if cuda.IsNoDriver(err) {
		return []int{0}, nil // no GPU: the host side only
	}
	if err != nil {
		return nil, err
	}
	if d.all {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	for _, o := range d.ordinals() {
		if o >= n {
			return nil, &flagError{Flag: "device", Value: strconv.Itoa(o),
				Want: fmt.Sprintf("0 .. %d: the driver shows %d device(s) (CUDA_VISIBLE_DEVICES chooses which)", n-1, n)}
		}
	}
	return d.ordinals(), nil
}

// needGPU returns an error when one of flags, which ask for GPU work, was
// given on the command line args and there is no GPU: without the flag the
// command measures the host side and says so, but with it the user asked
// for what cannot be measured here, and a run that measures nothing of
// what was asked must fail.
func needGPU(args []string, flags ...string) error {
	given := flagsGiven(args)
	for _, f := range flags {
		if !given[f] {
			continue
		}
		noGPU, err := probeGPU()
		if err != nil || noGPU == "" {
			return err
		}
		v := strings.Join(flagValues(args).typed(f), ",")
		return fmt.Errorf("--%s %s: needs a GPU, and there is none: %s", f, v, noGPU)
	}
	return nil
}
