package main

import (
	"strings"
	"testing"
)

func TestDeviceFlag(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		err      string
	}{
		{"0", "0", ""}, {"1", "1", ""}, {"0,1", "0,1", ""}, {"ALL", "all", ""}, {" all ", "all", ""},
		{"-1", "", "want a device number"}, {"x", "", "want a device number"}, {"1,1", "", "twice"}, {"", "", "want a device number"},
	} {
		var d deviceFlag
		err := d.UnmarshalText([]byte(tt.in))
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: error %v, want %q", tt.in, err, tt.err)
		case tt.err == "" && (err != nil || d.String() != tt.want):
			t.Errorf("%q: %v, %v; want %s", tt.in, d, err, tt.want)
		}
	}
	var zero deviceFlag
	if zero.String() != "0" {
		t.Errorf("zero value is %q, want device 0", zero.String())
	}
	if !hasGPU() {
		devs, err := (deviceFlag{all: true}).resolve()
		if err != nil || len(devs) != 1 || devs[0] != 0 {
			t.Errorf("all without a GPU: %v, %v; want [0] (the host side)", devs, err)
		}
	}
}
