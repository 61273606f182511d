package transfer

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPlanStaging is the staging plan's table: the mode, chunk size,
// number of chunks and lanes, and the staging it holds, by size, direction
// and load, for the default options (8 lanes, 2 MiB buffers, a 32 MiB
// window) and others.
func TestPlanStaging(t *testing.T) {
	opts := func(o Options) Options {
		o, err := o.Defaults()
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	def := opts(Options{Lanes: 8})
	const MiB = 1 << 20
	H, D := HostToDevice, DeviceToHost
	coop := func(n, chunks, lanes, buffers, stripe, stripes int) plan {
		return plan{mode: cooperative, n: n, chunk: MiB, chunks: chunks, lanes: lanes, buffer: 2 * MiB, perBuffer: 2, buffers: buffers, stripe: stripe, stripes: stripes}
	}
	// out: device to host, a transfer staging alone copies out with
	// streaming stores.
	out := func(p plan) plan { p.streamOut = true; return p }
	// ev: device to host, a cooperative transfer that finds the lanes
	// awake (as every one here does) issues its copies before it offers
	// itself to the lanes and evicts the staging it copied out.
	ev := func(p plan) plan { p.backToBack = true; return p }
	for _, tc := range []struct {
		n      int
		dir    Direction
		active int
		o      Options
		tu     tuning
		want   plan
	}{
		// Cooperative in 1 MiB chunks two to a buffer, 128 KiB stripes.
		{100, H, 1, def, defaultTuning(), coop(100, 1, 1, 1, 128<<10, 1)},
		{MiB, H, 1, def, defaultTuning(), coop(MiB, 1, 8, 1, 128<<10, 8)},
		{frameBytes, H, 1, def, defaultTuning(), coop(frameBytes, 3, 8, 2, 128<<10, 24)},
		{frameBytes, D, 1, def, defaultTuning(), ev(out(coop(frameBytes, 3, 8, 2, 128<<10, 24)))},
		{8 * MiB, D, 1, def, defaultTuning(), ev(out(coop(8*MiB, 8, 8, 4, 128<<10, 64)))},
		// One rule per direction, no cliff at 8 MiB: device to host
		// cooperative up to half the window, host to device up to all of it.
		{16 * MiB, D, 1, def, defaultTuning(), ev(out(coop(16*MiB, 16, 8, 8, 128<<10, 128)))},
		{16*MiB + 1, D, 1, def, defaultTuning(), out(plan{mode: chunked, n: 16*MiB + 1, chunk: 2 * MiB, chunks: 9, lanes: 8, buffer: 2 * MiB, depth: 2})},
		{32 * MiB, H, 1, def, defaultTuning(), coop(32*MiB, 32, 8, 16, 128<<10, 256)},
		{32*MiB + 1, H, 1, def, defaultTuning(), plan{mode: chunked, n: 32*MiB + 1, chunk: 2 * MiB, chunks: 17, lanes: 8, buffer: 2 * MiB, depth: 2}},
		{64 * MiB, D, 1, def, defaultTuning(), out(plan{mode: chunked, n: 64 * MiB, chunk: 2 * MiB, chunks: 32, lanes: 8, buffer: 2 * MiB, depth: 2})},
		// Load: transfers staging at once share the lanes, two at least.
		{frameBytes, H, 2, def, defaultTuning(), coop(frameBytes, 3, 4, 2, 256<<10, 12)},
		{frameBytes, H, 3, def, defaultTuning(), coop(frameBytes, 3, 3, 2, 352256, 9)},
		{frameBytes, D, 10, def, defaultTuning(), ev(coop(frameBytes, 3, 2, 2, 512<<10, 6))},
		{64 * MiB, H, 4, def, defaultTuning(), plan{mode: chunked, n: 64 * MiB, chunk: 2 * MiB, chunks: 32, lanes: 2, buffer: 2 * MiB, depth: 8}},
		// One lane: chunked, the lane's chunk as large as a buffer allows.
		{frameBytes, H, 1, opts(Options{Lanes: 1}), defaultTuning(), plan{mode: chunked, n: frameBytes, chunk: 2 * MiB, chunks: 2, lanes: 1, buffer: 2 * MiB, depth: 16}},
		{100, D, 1, opts(Options{Lanes: 1}), defaultTuning(), out(plan{mode: chunked, n: 100, chunk: 256 << 10, chunks: 1, lanes: 1, buffer: 2 * MiB, depth: 16})},
		// Four lanes: wider stripes.
		{frameBytes, H, 1, opts(Options{Lanes: 4}), defaultTuning(), coop(frameBytes, 3, 4, 2, 256<<10, 12)},
		// Small buffers: a chunk per buffer, cooperative while the buffers
		// fit in the direction's share of the window.
		{2 * testChunk, D, 1, opts(Options{Lanes: 4, ChunkSize: testChunk, WindowBytes: 4 * testChunk}), defaultTuning(), ev(out(plan{mode: cooperative, n: 2 * testChunk, chunk: testChunk, chunks: 2, lanes: 2, buffer: testChunk, perBuffer: 1, buffers: 2, stripe: 64 << 10, stripes: 2}))},
		{3 * testChunk, D, 1, opts(Options{Lanes: 4, ChunkSize: testChunk, WindowBytes: 4 * testChunk}), defaultTuning(), out(plan{mode: chunked, n: 3 * testChunk, chunk: testChunk, chunks: 3, lanes: 3, buffer: testChunk, depth: 2})},
		{4 * testChunk, H, 1, opts(Options{Lanes: 4, ChunkSize: testChunk, WindowBytes: 4 * testChunk}), defaultTuning(), plan{mode: cooperative, n: 4 * testChunk, chunk: testChunk, chunks: 4, lanes: 4, buffer: testChunk, perBuffer: 1, buffers: 4, stripe: 64 << 10, stripes: 4}},
		// A buffer that is not a multiple of the chunk: two chunks a buffer.
		{5 * MiB, H, 1, opts(Options{Lanes: 8, ChunkSize: 5 << 19}), defaultTuning(), plan{mode: cooperative, n: 5 * MiB, chunk: MiB, chunks: 5, lanes: 8, buffer: 5 << 19, perBuffer: 2, buffers: 3, stripe: 128 << 10, stripes: 40}},
		// The cooperative mode off.
		{MiB, H, 1, def, chunkedOnly(), plan{mode: chunked, n: MiB, chunk: 256 << 10, chunks: 4, lanes: 4, buffer: 2 * MiB, depth: 4}},
	} {
		// A cooperative download back to back and staging alone hands off.
		tc.want.handoff = tc.want.backToBack && tc.want.streamOut && tc.tu.handoff
		got := planStaging(tc.n, tc.dir, tc.active, false, tc.o, tc.tu)
		if got.mode == cooperative {
			// Its fallback is the plan of the same transfer with the cooperative mode off.
			off := tc.tu
			off.coopShare = [2]int{}
			if f, want := got.fallback(), planStaging(tc.n, tc.dir, tc.active, false, tc.o, off); f != want {
				t.Errorf("%d bytes %v, %d active: fallback %+v, want %+v", tc.n, tc.dir, tc.active, f, want)
			}
			got.alt = cut{}
		}
		if got != tc.want {
			t.Errorf("planStaging(%d, %v, %d active, Lanes %d, ChunkSize %d, WindowBytes %d, %+v)\n got %+v\nwant %+v", tc.n, tc.dir, tc.active, tc.o.Lanes, tc.o.ChunkSize, tc.o.WindowBytes, tc.tu, got, tc.want)
		}
	}
}

// TestPlanOneSwitch checks, for the default options, each direction and
// every size up to 64 MiB in 64 KiB steps, that the plan switches from
// cooperative to chunked once, where the staging stops fitting in the
// direction's share of the window, and never back.
func TestPlanOneSwitch(t *testing.T) {
	o, _ := Options{Lanes: 8}.Defaults()
	tu := defaultTuning()
	for _, d := range []Direction{HostToDevice, DeviceToHost} {
		limit := int(o.WindowBytes) / tu.coopShare[d]
		last := cooperative
		for n := 64 << 10; n <= 64<<20; n += 64 << 10 {
			m := planStaging(n, d, 1, false, o, tu).mode
			if want := map[bool]mode{true: cooperative, false: chunked}[n <= limit]; m != want {
				t.Fatalf("%v, %d bytes: %v, want %v", d, n, m, want)
			}
			if last == chunked && m == cooperative {
				t.Fatalf("%v, %d bytes: back to cooperative", d, n)
			}
			last = m
		}
	}
}

// TestPlanCovers checks the plan's invariants on random sizes and
// options, directions and loads: the chunks cover the transfer exactly, a
// chunk fits its buffer, the stripes of a cooperative plan tile every chunk
// in order, its buffers fit in its share of the window, and the lanes are
// between 1 and Lanes; the same for a cooperative plan's chunked fallback.
func TestPlanCovers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		o, err := Options{
			Lanes:       1 + r.IntN(16),
			ChunkSize:   4096 * (1 + r.IntN(600)),
			WindowBytes: 0,
		}.Defaults()
		if err != nil {
			t.Fatal(err)
		}
		if r.IntN(2) == 0 {
			o.WindowBytes = int64(o.ChunkSize) * int64(1+r.IntN(20))
		}
		n := 1 + r.IntN(64<<20)
		d, active := Direction(r.IntN(2)), 1+r.IntN(12)
		q := planStaging(n, d, active, r.IntN(2) == 0, o, defaultTuning())
		plans := []plan{q}
		if q.mode == cooperative {
			plans = append(plans, q.fallback()) // what runs when its staging cannot all be had
		}
		for _, p := range plans {
			what := fmt.Sprintf("n %d, %v, %d active, Lanes %d, ChunkSize %d, WindowBytes %d: %+v", n, d, active, o.Lanes, o.ChunkSize, o.WindowBytes, p)
			if p.chunk <= 0 || p.chunk > p.buffer || (p.chunks-1)*p.chunk >= n || p.chunks*p.chunk < n {
				t.Fatalf("%s: chunks do not cover the transfer", what)
			}
			if p.lanes < 1 || p.lanes > o.Lanes {
				t.Fatalf("%s: lanes out of range", what)
			}
			if p.mode == chunked {
				if p.depth < 2 {
					t.Fatalf("%s: depth", what)
				}
				continue
			}
			if p.buffers*p.perBuffer < p.chunks || p.buffers > o.Slots()/defaultTuning().coopShare[d] || p.perBuffer*p.chunk > p.buffer {
				t.Fatalf("%s: buffers", what)
			}
			next := 0
			for s := range p.stripes {
				i, lo, hi := p.stripeRange(s)
				clo, chi := p.chunkRange(i)
				if lo != next || hi <= lo || lo < clo || hi > chi {
					t.Fatalf("%s: stripe %d is [%d, %d) of chunk %d [%d, %d), want it to start at %d", what, s, lo, hi, i, clo, chi, next)
				}
				next = hi
			}
			if next != n {
				t.Fatalf("%s: stripes end at %d", what, next)
			}
		}
	}
}

// TestChunkFor checks the chunk size of a chunked transfer: the buffer
// size for large transfers, cut so that every lane gets work for smaller
// ones, never below minChunk (or the buffer, if that is smaller), in whole
// cache lines.
func TestChunkFor(t *testing.T) {
	const minChunk = 256 << 10
	for _, tc := range []struct{ n, chunk, lanes, want int }{
		{256 << 20, 4 << 20, 16, 4 << 20},
		{32 << 20, 4 << 20, 16, 2 << 20},
		{3 << 20, 4 << 20, 16, minChunk},
		{3<<20 + 1, 4 << 20, 1, 3<<20 + 64},
		{1 << 20, 64 << 10, 16, 64 << 10},
		{10*testChunk + 3, testChunk, 3, testChunk},
		{100, 4 << 20, 1, minChunk},
	} {
		if got := chunkFor(tc.n, tc.chunk, tc.lanes, minChunk); got != tc.want {
			t.Errorf("chunkFor(%d, %d, %d) = %d, want %d", tc.n, tc.chunk, tc.lanes, got, tc.want)
		}
	}
}

// TestPlanAsleep checks the rules for a transfer that finds the standing
// lanes asleep: a cooperative transfer asks for its direction's
// tuning.coldLanes (two at least), while chunked transfers and transfers that find
// the lanes awake keep them all; a cooperative
// device-to-host transfer issues its copies before it offers itself to the
// lanes, and evicts the staging it copied out, only when the lanes are
// awake; no other transfer does either.
func TestPlanAsleep(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct {
		n      int
		dir    Direction
		lanes  int
		asleep bool
		want   int
		awake  bool // device to host: backToBack
	}{
		{frameBytes, HostToDevice, 8, true, 3, false},
		{frameBytes, HostToDevice, 8, false, 8, false},
		{frameBytes, DeviceToHost, 8, true, 4, false},
		{frameBytes, DeviceToHost, 8, false, 8, true},
		{frameBytes, HostToDevice, 3, true, 3, false},
		{frameBytes, HostToDevice, 2, true, 2, false},
		{32 * MiB, HostToDevice, 8, true, 3, false},
		{16 * MiB, DeviceToHost, 8, true, 4, false},
		{frameBytes, DeviceToHost, 3, true, 3, false},
		{64 * MiB, HostToDevice, 8, true, 8, false},  // chunked
		{64 * MiB, DeviceToHost, 8, false, 8, false}, // chunked
		{100, HostToDevice, 8, true, 1, false},       // one stripe
	} {
		o, err := Options{Lanes: tc.lanes}.Defaults()
		if err != nil {
			t.Fatal(err)
		}
		p := planStaging(tc.n, tc.dir, 1, tc.asleep, o, defaultTuning())
		if p.lanes != tc.want || p.backToBack != tc.awake {
			t.Errorf("%d bytes %v, Lanes %d, asleep %v: %d lanes, back to back %v; want %d, %v", tc.n, tc.dir, tc.lanes, tc.asleep, p.lanes, p.backToBack, tc.want, tc.awake)
		}
	}
	// Another tuning's share, and none.
	o, _ := Options{Lanes: 8}.Defaults()
	tu := defaultTuning()
	tu.coldLanes = [2]int{HostToDevice: 1, DeviceToHost: 5}
	if got := planStaging(frameBytes, HostToDevice, 1, true, o, tu).lanes; got != 2 {
		t.Errorf("coldLanes 1: %d lanes, want 2", got)
	}
	if got := planStaging(frameBytes, DeviceToHost, 1, true, o, tu).lanes; got != 5 {
		t.Errorf("coldLanes 5: %d lanes, want 5", got)
	}
	tu.coldLanes = [2]int{}
	if got := planStaging(frameBytes, HostToDevice, 1, true, o, tu).lanes; got != 8 {
		t.Errorf("coldLanes 0: %d lanes, want 8", got)
	}
	// The handoff off: back to back still, no handoff.
	tu = defaultTuning()
	tu.handoff = false
	if p := planStaging(frameBytes, DeviceToHost, 1, false, o, tu); !p.backToBack || p.handoff {
		t.Errorf("handoff off: back to back %v, handoff %v; want true, false", p.backToBack, p.handoff)
	}
}
