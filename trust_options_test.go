package pinpool

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pinpool/pinpool/hostmem"
)

// TestOptionsRefused: every field out of range, and every contradiction,
// is an ErrInvalidOptions that names the field, before the backend is
// touched. Before the fix only a negative Budget was refused: SlabSize =
// MaxInt overflowed into Alloc(-9223372036854775808), SlabMax = 1<<62
// called Alloc(0), and SlabMax = 1<<40 made every Get fail.
func TestOptionsRefused(t *testing.T) {
	var memTotal int64 = 1 << 62
	if mi, err := hostmem.ReadMemInfo(); err == nil {
		memTotal = int64(mi.Total)
	}
	tests := []struct {
		field string
		opt   Options
	}{
		{"Budget", Options{Budget: -1}},
		{"Budget", Options{Budget: 1}},
		{"Budget", Options{Budget: pageSize - 1}},
		{"GrowCount", Options{GrowCount: -5}},
		{"GrowBytes", Options{GrowBytes: -1}},
		{"SlabMax", Options{SlabMax: 1 << 62}},
		{"SlabMax", Options{SlabMax: 1 << 40}},
		{"SlabMax", Options{SlabMax: maxSlabMax + 1}},
		{"SlabSize", Options{SlabSize: math.MaxInt}},
		{"SlabSize", Options{SlabSize: 1}},
		{"SlabSize", Options{SlabSize: -4096}},
		{"SlabSize", Options{SlabSize: 2 << 30}},
		{"SlabSize", Options{SlabSize: 1 << 20, SlabMax: 1 << 20}},
		{"SlabSize", Options{SlabSize: 8 << 20, Budget: 4 << 20}},
		{"IdleTimeout", Options{IdleTimeout: time.Nanosecond}},
		{"IdleTimeout", Options{IdleTimeout: time.Millisecond - 1}},
		{"Backend", Options{Backend: (*HostBackend)(nil)}},
		{"MinAvailable", Options{MinAvailable: memTotal}},
	}
	for _, tt := range tests {
		f := newFake()
		o := tt.opt
		if o.Backend == nil {
			o.Backend = f
		}
		p, err := New(o)
		if p != nil || !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tt.field+" = ") {
			t.Errorf("New(%+v) = %v, %v; want ErrInvalidOptions naming %s", tt.opt, p, err, tt.field)
		}
		if f.calls != 0 {
			t.Errorf("New(%+v) touched the backend", tt.opt)
		}
	}
}

// TestOptionsAccepted: the edges that are valid work as documented.
func TestOptionsAccepted(t *testing.T) {
	t.Run("Budget one page", func(t *testing.T) {
		p, _ := newTestPool(t, Options{Budget: pageSize})
		mustGet(t, p, pageSize).Release()
		if _, err := p.TryGet(2 * pageSize); !errors.Is(err, ErrBudget) {
			t.Fatalf("TryGet(8192) under a 4096-byte budget = %v", err)
		}
	})
	t.Run("no slabs", func(t *testing.T) {
		p, f := newTestPool(t, Options{SlabMax: -1})
		mustGet(t, p, 4096).Release()
		if _, live, allocs, _ := f.stats(); live != DefaultGrowCount*pageSize || allocs != 1 {
			t.Fatalf("SlabMax -1: a 4 KiB miss allocated %d bytes in %d allocations, want GrowCount buffers in one", live, allocs)
		}
	})
	t.Run("large SlabMax raises the default SlabSize", func(t *testing.T) {
		p, f := newTestPool(t, Options{SlabMax: 8 << 20})
		mustGet(t, p, 8<<20).Release()
		if _, live, _, _ := f.stats(); live != 32<<20 {
			t.Fatalf("a slab of 8 MiB buffers is %d bytes, want 4 buffers", live)
		}
	})
	for _, o := range []Options{{IdleTimeout: -1}, {IdleTimeout: time.Millisecond}, {MaxIdle: -1}, {CloseWait: -1}, {GrowCount: 1 << 30}, {GrowBytes: 1}} {
		p, _ := newTestPool(t, o)
		mustGet(t, p, frame).Release()
	}
}

// FuzzOptions: any Options either is refused with ErrInvalidOptions, or
// makes a pool that serves (or refuses with ErrBudget) every size, never
// asks its backend for a size that breaks the contract, and leaves
// nothing allocated after Close.
func FuzzOptionsRefuseOrServe(f *testing.F) {
	f.Add(int64(0), 0, 0, 0, int64(0), 0, int64(0), false)
	f.Add(int64(1), math.MaxInt, 1<<62, -5, int64(-1), 0, int64(1), false)
	f.Add(int64(4096), 0, 1<<40, 0, int64(0), 0, int64(0), true)
	f.Add(int64(1<<20), 0, 0, 0, int64(0), 0, int64(0), false)
	f.Add(int64(8<<20), 4<<20, 1<<20, 4, int64(64<<20), 32, int64(time.Second), false)
	f.Add(int64(0), 1<<30, 1<<29, 1, int64(1), -1, int64(-1), true)
	f.Fuzz(func(t *testing.T, budget int64, slabSize, slabMax, growCount int, growBytes int64, maxIdle int, idle int64, exact bool) {
		sb := &sizeCheckingBackend{fakeBackend: newFake()}
		o := Options{Backend: sb, Budget: budget, SlabSize: slabSize, SlabMax: slabMax, GrowCount: growCount,
			GrowBytes: growBytes, MaxIdle: maxIdle, IdleTimeout: time.Duration(idle), Exact: exact, MinAvailable: -1}
		p, err := New(o)
		if err != nil {
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("New(%+v) = %v, want ErrInvalidOptions or a pool", o, err)
			}
			return
		}
		// Cap the memory a fuzzed pool may take (GrowBytes, slabs) by
		// sizes: the fake backend maps without touching, so this is cheap.
		for _, n := range []int{1, 4096, 65536, 1 << 20, frame} {
			b, err := p.TryGet(n)
			if err != nil {
				if !errors.Is(err, ErrBudget) {
					t.Fatalf("%+v: TryGet(%d) = %v", o, n, err)
				}
				continue
			}
			if len(b.Bytes()) != n {
				t.Fatalf("%+v: TryGet(%d) gave %d bytes", o, n, len(b.Bytes()))
			}
			b.Bytes()[n-1] = 1
			if err := b.Release(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if len(sb.bad) > 0 {
			t.Fatalf("%+v: the backend was asked for sizes %v", o, sb.bad)
		}
		if live, _, _, _ := sb.stats(); live != 0 {
			t.Fatalf("%+v: %d bytes left after Close", o, live)
		}
	})
}
