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
			return fmt.Errorf("%q: want a device number from 0, a list of them, or all", f)
		}
		for _, m := range list {
			if m == n {
				return fmt.Errorf("device %d twice", n)
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
			return nil, fmt.Errorf("--device %d: the driver shows %d device(s), 0 .. %d (CUDA_VISIBLE_DEVICES chooses which)", o, n, n-1)
		}
	}
	return d.ordinals(), nil
}
