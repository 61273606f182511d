package multigpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/transfer"
)

// TestOpenInvalid checks that Open refuses bad device lists and options
// before it touches the driver: the same errors with or without a GPU.
func TestOpenInvalid(t *testing.T) {
	cases := []struct {
		name    string
		devices []int
		opt     Options
		want    error
		says    string
	}{
		{"no device", nil, Options{}, ErrInvalidDevices, "no device"},
		{"empty list", []int{}, Options{}, ErrInvalidDevices, "no device"},
		{"negative ordinal", []int{0, -1}, Options{}, ErrInvalidDevices, "negative device ordinal -1"},
		{"duplicate", []int{0, 1, 0}, Options{}, ErrInvalidDevices, "device 0 twice"},
		{"negative budget", []int{0}, Options{Budget: -1}, ErrInvalidOptions, "Budget = -1"},
		{"negative chunk", []int{0}, Options{Transfer: transfer.Options{ChunkSize: -1}}, ErrInvalidOptions, "ChunkSize"},
		{"negative window", []int{0}, Options{Transfer: transfer.Options{WindowBytes: -1}}, ErrInvalidOptions, "WindowBytes"},
		{"window below a chunk", []int{0}, Options{Transfer: transfer.Options{ChunkSize: 4 << 20, WindowBytes: 1 << 20}}, ErrInvalidOptions, "holds no chunk"},
		{"negative lanes", []int{0}, Options{Transfer: transfer.Options{Lanes: -2}}, ErrInvalidOptions, "Lanes = -2"},
		{"one stream", []int{0}, Options{Transfer: transfer.Options{Streams: 1}}, ErrInvalidOptions, "Streams = 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(tc.devices, tc.opt)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, tc.want) || !strings.HasPrefix(err.Error(), "multigpu: ") || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q: want %v, saying %q", err, tc.want, tc.says)
			}
			if cuda.IsNoDriver(err) {
				t.Errorf("error %q: checked after the driver", err)
			}
		})
	}
}

// TestOpenBeyondDevices asks for an ordinal past every device: without a
// driver Open says there is none, with one it names the device count.
func TestOpenBeyondDevices(t *testing.T) {
	const far = 1 << 20
	s, err := Open([]int{far}, Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded")
	}
	if !strings.HasPrefix(err.Error(), "multigpu: ") {
		t.Errorf("error %q lacks the package prefix", err)
	}
	n, cerr := cuda.DeviceCount()
	switch {
	case cuda.IsNoDriver(cerr) || cerr == nil && n == 0:
		if !cuda.IsNoDriver(err) {
			t.Errorf("without a GPU: error %q is not a no-driver error", err)
		}
		if _, err := AllDevices(); !cuda.IsNoDriver(err) {
			t.Errorf("AllDevices without a GPU: %v", err)
		}
	case cerr != nil:
		t.Skipf("the driver fails: %v", cerr)
	default:
		if !errors.Is(err, ErrInvalidDevices) || !strings.Contains(err.Error(), "shows") {
			t.Errorf("with %d devices: error %q, want ErrInvalidDevices naming the count", n, err)
		}
	}
}

// TestOptionsWindow checks the staging window Open sizes each staging pool
// by: transfer's defaults where the template leaves them zero.
func TestOptionsWindow(t *testing.T) {
	cases := []struct {
		t            transfer.Options
		slots, chunk int
	}{
		{transfer.Options{}, transfer.DefaultWindowBytes / transfer.DefaultChunkSize, transfer.DefaultChunkSize},
		{transfer.Options{ChunkSize: 1 << 20}, 32, 1 << 20},
		{transfer.Options{ChunkSize: 64 << 20}, 1, 64 << 20}, // the default window grows to one chunk
		{transfer.Options{ChunkSize: 3 << 20, WindowBytes: 10 << 20}, 3, 3 << 20},
	}
	for _, tc := range cases {
		slots, chunk := Options{Transfer: tc.t}.window()
		if slots != tc.slots || chunk != tc.chunk {
			t.Errorf("%+v: window %d x %d, want %d x %d", tc.t, slots, chunk, tc.slots, tc.chunk)
		}
	}
}

// TestClosedSet checks the methods of a closed set without a GPU: a set
// with nothing opened in it.
func TestClosedSet(t *testing.T) {
	s := &Set{devices: []int{0, 1}, index: map[int]int{0: 0, 1: 1}, per: make([]perDevice, 2)}
	if _, err := s.Copier(2); !errors.Is(err, ErrNotInSet) || !strings.Contains(err.Error(), "device 2") {
		t.Errorf("Copier(2): %v", err)
	}
	if _, err := s.Context(-1); !errors.Is(err, ErrNotInSet) {
		t.Errorf("Context(-1): %v", err)
	}
	var closed []string
	s.closers = []func() error{
		func() error { closed = append(closed, "first"); return nil },
		func() error { closed = append(closed, "second"); return errors.New("boom") },
		func() error { closed = append(closed, "third"); return nil },
	}
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "boom") || !strings.HasPrefix(err.Error(), "multigpu: ") {
		t.Errorf("Close: %v", err)
	}
	if strings.Join(closed, ",") != "third,second,first" {
		t.Errorf("closed in order %v", closed)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Copier(0); !errors.Is(err, ErrClosed) {
		t.Errorf("Copier after Close: %v", err)
	}
	d := s.Devices()
	d[0] = 9
	if s.Devices()[0] != 0 {
		t.Error("Devices returns the set's own slice")
	}
}
