package pinpool

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pinpool/pinpool/hostmem"
)

// TestAdvOptionsRefused: New refuses every invalid option with an error
// wrapping ErrInvalidOptions that names the field, without touching the
// backend.
func TestAdvOptionsRefused(t *testing.T) {
	type tc struct {
		name  string
		field string
		o     Options
	}
	cases := []tc{
		{"negative Budget", "Budget", Options{Budget: -1}},
		{"Budget 1", "Budget", Options{Budget: 1}},
		{"Budget 4095", "Budget", Options{Budget: pageSize - 1}},
		{"negative SlabSize", "SlabSize", Options{SlabSize: -1}},
		{"SlabSize 1", "SlabSize", Options{SlabSize: 1}},
		{"SlabSize not whole pages", "SlabSize", Options{SlabSize: 3*pageSize + 1}},
		{"SlabSize over 1 GiB", "SlabSize", Options{SlabSize: 1<<30 + pageSize}},
		{"SlabSize MaxInt", "SlabSize", Options{SlabSize: math.MaxInt}},
		{"SlabMax over 512 MiB", "SlabMax", Options{SlabMax: 1<<29 + 1}},
		{"SlabMax 1<<40", "SlabMax", Options{SlabMax: 1 << 40}},
		{"SlabMax 1<<62", "SlabMax", Options{SlabMax: 1 << 62}},
		{"SlabMax MaxInt", "SlabMax", Options{SlabMax: math.MaxInt}},
		{"SlabSize < 2*SlabMax", "SlabSize", Options{SlabMax: 1 << 20, SlabSize: 1 << 20}},
		{"SlabSize < 2*SlabMax by a page", "SlabSize", Options{SlabMax: 1 << 20, SlabSize: 2<<20 - pageSize}},
		{"negative GrowCount", "GrowCount", Options{GrowCount: -1}},
		{"negative GrowBytes", "GrowBytes", Options{GrowBytes: -1}},
		{"IdleTimeout 1ns", "IdleTimeout", Options{IdleTimeout: 1}},
		{"IdleTimeout just under 1ms", "IdleTimeout", Options{IdleTimeout: time.Millisecond - 1}},
		{"IdleDecay 1ns", "IdleDecay", Options{IdleDecay: 1}},
		{"IdleDecay just under 1ms", "IdleDecay", Options{IdleDecay: time.Millisecond - 1}},
		{"SlabSize > Budget", "SlabSize", Options{Budget: 1 << 20, SlabSize: 2 << 20}},
		{"typed-nil HostBackend", "Backend", Options{Backend: (*HostBackend)(nil)}},
		{"typed-nil faultBackend", "Backend", Options{Backend: (*faultBackend)(nil)}},
	}
	if mi, err := hostmem.ReadMemInfo(); err == nil && mi.Total > 0 {
		cases = append(cases,
			tc{"MinAvailable = MemTotal", "MinAvailable", Options{MinAvailable: int64(mi.Total)}},
			tc{"MinAvailable > MemTotal", "MinAvailable", Options{MinAvailable: int64(mi.Total) + 1}},
			tc{"MinAvailable MaxInt64", "MinAvailable", Options{MinAvailable: math.MaxInt64}})
	} else {
		t.Logf("MemTotal unknown (%v): MinAvailable cases skipped", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fb := newFaultBackend()
			o := c.o
			if o.Backend == nil {
				o.Backend = fb
			}
			if o.MinAvailable == 0 {
				o.MinAvailable = -1
			}
			var p *Pool
			var err error
			mustWithin(t, 5*time.Second, "New", func() { p, err = New(o) })
			if err == nil {
				p.Close()
				t.Fatalf("New accepted %s", c.name)
			}
			if !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("New(%s) = %v, want an error wrapping ErrInvalidOptions", c.name, err)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("New(%s) = %q, does not name the field %s", c.name, err, c.field)
			}
			if p != nil {
				t.Errorf("New returned a pool with an error")
			}
			if n := fb.allocCalls.Load() + fb.nameCalls.Load(); n != 0 {
				t.Errorf("New called the backend %d times for invalid options", n)
			}
		})
	}
}

// TestAdvOptionsAccepted: valid edge values work.
func TestAdvOptionsAccepted(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Options
		get  []int // sizes that must be served, one at a time
	}{
		{"zero", Options{}, []int{1, pageSize, frame}},
		{"SlabMax -1", Options{SlabMax: -1}, []int{pageSize, 65536}},
		{"SlabMax 512 MiB", Options{SlabMax: 1 << 29, SlabSize: 1 << 30}, []int{pageSize}},
		{"SlabSize 1 GiB", Options{SlabSize: 1 << 30}, []int{pageSize}},
		{"SlabSize = 2*SlabMax", Options{SlabMax: 1 << 20, SlabSize: 2 << 20}, []int{1 << 20, pageSize}},
		{"Budget 4096", Options{Budget: pageSize}, []int{pageSize, 1}},
		{"Budget 1 MiB, default slab", Options{Budget: 1 << 20}, []int{pageSize, 65536, 1 << 20}},
		{"Budget 1 MiB + 1 page", Options{Budget: 1<<20 + pageSize}, []int{pageSize, 65536, 1 << 20}},
		{"SlabSize = Budget", Options{Budget: 8 << 20, SlabSize: 8 << 20}, []int{pageSize, 65536}},
		{"IdleTimeout 1ms", Options{IdleTimeout: time.Millisecond}, []int{pageSize}},
		{"IdleTimeout -1", Options{IdleTimeout: -1}, []int{pageSize}},
		{"IdleDecay 1ms", Options{IdleDecay: time.Millisecond}, []int{pageSize, frame}},
		{"IdleDecay -1", Options{IdleDecay: -1}, []int{pageSize}},
		{"IdleDecay > IdleTimeout", Options{IdleDecay: time.Hour, IdleTimeout: time.Millisecond}, []int{pageSize}},
		{"IdleDecay MaxInt64, no timeout", Options{IdleDecay: math.MaxInt64, IdleTimeout: -1}, []int{pageSize}},
		{"CloseWait -1", Options{CloseWait: -1}, []int{pageSize}},
		{"CloseWait 1ns", Options{CloseWait: 1}, []int{pageSize}},
		{"CloseWait 1h", Options{CloseWait: time.Hour}, []int{pageSize}},
		{"GrowBytes 1", Options{GrowBytes: 1}, []int{frame}},
		{"GrowCount huge", Options{GrowCount: math.MaxInt}, []int{frame}},
		{"GrowBytes huge", Options{GrowBytes: math.MaxInt64}, []int{pageSize}},
		{"MaxIdle -1", Options{MaxIdle: -1}, []int{pageSize}},
		{"Exact", Options{Exact: true}, []int{1, frame}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, fb := newFaultPool(t, c.o)
			for _, n := range c.get {
				var b Buffer
				var err error
				mustWithin(t, 5*time.Second, "Get", func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					b, err = p.Get(ctx, n)
				})
				if err != nil {
					t.Fatalf("Get(%d): %v", n, err)
				}
				if len(b.Bytes()) != n {
					t.Fatalf("Get(%d): %d bytes", n, len(b.Bytes()))
				}
				b.Bytes()[n-1] = 1
				b.Release()
			}
			if c.o.Budget > 0 {
				if _, maxLive, _, _ := fb.stats(); maxLive > c.o.Budget {
					t.Errorf("backend peak %d over Budget %d", maxLive, c.o.Budget)
				}
			}
		})
	}
	// Budget 4096: a request of two pages can never fit, and says so at once.
	p, _ := newFaultPool(t, Options{Budget: pageSize})
	var err error
	// No deadline: a Get that waited for room would never return.
	mustWithin(t, 30*time.Second, "Get(8192) under Budget 4096", func() { _, err = p.Get(context.Background(), 2*pageSize) })
	if !errors.Is(err, ErrBudget) {
		t.Errorf("Get(8192) under Budget 4096: %v, want ErrBudget at once", err)
	}
}

// FuzzOptions: for any options, either New refuses them with
// ErrInvalidOptions (without touching the backend), or the pool works: Get
// and Release of a few sizes succeed or fail with ErrBudget or
// ErrInvalidSize only, the backend is only asked for positive multiples of
// 4096, and after Close it holds nothing.
func FuzzOptions(f *testing.F) {
	type seed struct {
		budget    int64
		slabSize  int
		slabMax   int
		growCount int
		growBytes int64
		maxIdle   int
		idleNs    int64
		exact     bool
	}
	for _, s := range []seed{
		{},
		{exact: true},
		{budget: -1}, {budget: 1}, {budget: 4095}, {budget: 4096}, {budget: 4097},
		{budget: 1 << 20}, {budget: 1<<20 + 4096}, {budget: 8 << 20}, {budget: 3110400},
		{slabSize: -1}, {slabSize: 1}, {slabSize: 4096}, {slabSize: 1 << 30}, {slabSize: 1<<30 + 4096}, {slabSize: math.MaxInt},
		{slabMax: -1}, {slabMax: 1}, {slabMax: 4096}, {slabMax: 1 << 29}, {slabMax: 1<<29 + 1}, {slabMax: 1 << 40}, {slabMax: 1 << 62}, {slabMax: math.MaxInt},
		{slabMax: 1 << 20, slabSize: 1 << 20}, {slabMax: 1 << 20, slabSize: 2 << 20},
		{slabMax: 4096, slabSize: 8192, budget: 8192},
		{growCount: -1}, {growCount: 1}, {growCount: math.MaxInt},
		{growBytes: -1}, {growBytes: 1}, {growBytes: math.MaxInt64},
		{growCount: 1000, growBytes: 1 << 30, budget: 64 << 20},
		{maxIdle: -1}, {maxIdle: 1}, {maxIdle: math.MaxInt},
		{idleNs: 1}, {idleNs: int64(time.Millisecond) - 1}, {idleNs: int64(time.Millisecond)}, {idleNs: -1},
		{budget: 1 << 20, slabSize: 2 << 20},
		{budget: 4096, slabMax: -1, exact: true},
		{budget: 12 << 20, slabMax: 1 << 20, slabSize: 8 << 20, growCount: 3, growBytes: 5 << 20, maxIdle: 2, idleNs: int64(time.Millisecond), exact: true},
	} {
		f.Add(s.budget, s.slabSize, s.slabMax, s.growCount, s.growBytes, s.maxIdle, s.idleNs, s.exact)
	}
	f.Fuzz(func(t *testing.T, budget int64, slabSize, slabMax, growCount int, growBytes int64, maxIdle int, idleNs int64, exact bool) {
		fb := newFaultBackend()
		o := Options{
			Backend: fb, MinAvailable: -1, Budget: budget, SlabSize: slabSize, SlabMax: slabMax,
			GrowCount: growCount, GrowBytes: growBytes, MaxIdle: maxIdle, IdleTimeout: time.Duration(idleNs), Exact: exact,
		}
		var p *Pool
		var err error
		if !within(t, 10*time.Second, "New", func() { p, err = New(o) }) {
			t.FailNow()
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("New(%+v) = %v, want nil or an error wrapping ErrInvalidOptions", o, err)
			}
			if n := fb.allocCalls.Load(); n != 0 {
				t.Fatalf("New called Alloc %d times for refused options", n)
			}
			return
		}
		for _, n := range []int{4096, 65536, 1 << 20, frame} {
			for _, blocking := range []bool{false, true} {
				var b Buffer
				var err error
				start := time.Now()
				if !within(t, 10*time.Second, "Get", func() {
					if blocking {
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
						defer cancel()
						b, err = p.Get(ctx, n)
					} else {
						b, err = p.TryGet(n)
					}
				}) {
					t.FailNow()
				}
				if err != nil {
					if errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("options %+v: Get(%d) waited %v with nothing held: %v", o, n, time.Since(start), err)
					}
					if !errors.Is(err, ErrBudget) && !errors.Is(err, ErrInvalidSize) {
						t.Fatalf("options %+v: get(%d) = %v, want success, ErrBudget or ErrInvalidSize", o, n, err)
					}
					continue
				}
				if len(b.Bytes()) != n {
					t.Fatalf("options %+v: get(%d) gave %d bytes", o, n, len(b.Bytes()))
				}
				b.Bytes()[0], b.Bytes()[n-1] = 1, 2
				if err := b.Release(); err != nil {
					t.Fatalf("Release: %v", err)
				}
			}
		}
		st := p.Stats()
		if budget > 0 && (st.PeakHeld > budget || st.BytesHeld > budget) {
			t.Fatalf("options %+v: held %d, peak %d over Budget", o, st.BytesHeld, st.PeakHeld)
		}
		if !within(t, 10*time.Second, "Close", func() { err = p.Close() }) {
			t.FailNow()
		}
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
		fb.waitReleased(t, "after Close")
		fb.check(t)
		if live, _, _, _ := fb.stats(); live != 0 {
			t.Fatalf("options %+v: after Close the backend holds %d bytes", o, live)
		}
		if budget > 0 {
			if _, maxLive, _, _ := fb.stats(); maxLive > budget {
				t.Fatalf("options %+v: backend peak %d over Budget", o, maxLive)
			}
		}
	})
}
