package transfer

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPlanStaging is the staging plan's table: the mode, chunk size,
// number of chunks and lanes, and the staging it holds, for the default
// options (8 lanes, 2 MiB buffers, a 32 MiB window) and others.
func TestPlanStaging(t *testing.T) {
	def := Options{Lanes: 8}
	def, _ = def.Defaults()
	opts := func(o Options) Options {
		o, err := o.Defaults()
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	const MiB = 1 << 20
	for _, tc := range []struct {
		n    int
		o    Options
		tu   tuning
		want plan
	}{
		// Cooperative up to half the window, in 1 MiB chunks two to a
		// buffer, 128 KiB stripes: no second rule, no cliff at 8 MiB.
		{100, def, defaultTuning(), plan{mode: cooperative, n: 100, chunk: MiB, chunks: 1, lanes: 1, buffer: 2 * MiB, perBuffer: 2, buffers: 1, stripe: 128 << 10, stripes: 1}},
		{MiB, def, defaultTuning(), plan{mode: cooperative, n: MiB, chunk: MiB, chunks: 1, lanes: 8, buffer: 2 * MiB, perBuffer: 2, buffers: 1, stripe: 128 << 10, stripes: 8}},
		{frameBytes, def, defaultTuning(), plan{mode: cooperative, n: frameBytes, chunk: MiB, chunks: 3, lanes: 8, buffer: 2 * MiB, perBuffer: 2, buffers: 2, stripe: 128 << 10, stripes: 24}},
		{8 * MiB, def, defaultTuning(), plan{mode: cooperative, n: 8 * MiB, chunk: MiB, chunks: 8, lanes: 8, buffer: 2 * MiB, perBuffer: 2, buffers: 4, stripe: 128 << 10, stripes: 64}},
		{16 * MiB, def, defaultTuning(), plan{mode: cooperative, n: 16 * MiB, chunk: MiB, chunks: 16, lanes: 8, buffer: 2 * MiB, perBuffer: 2, buffers: 8, stripe: 128 << 10, stripes: 128}},
		// Chunked from there, in whole buffers, two in flight per lane.
		{16*MiB + 1, def, defaultTuning(), plan{mode: chunked, n: 16*MiB + 1, chunk: 2 * MiB, chunks: 9, lanes: 8, buffer: 2 * MiB, depth: 2}},
		{64 * MiB, def, defaultTuning(), plan{mode: chunked, n: 64 * MiB, chunk: 2 * MiB, chunks: 32, lanes: 8, buffer: 2 * MiB, depth: 2}},
		// One lane: chunked, the lane's chunk as large as a buffer allows.
		{frameBytes, opts(Options{Lanes: 1}), defaultTuning(), plan{mode: chunked, n: frameBytes, chunk: 2 * MiB, chunks: 2, lanes: 1, buffer: 2 * MiB, depth: 16}},
		{100, opts(Options{Lanes: 1}), defaultTuning(), plan{mode: chunked, n: 100, chunk: 256 << 10, chunks: 1, lanes: 1, buffer: 2 * MiB, depth: 16}},
		// Four lanes: wider stripes.
		{frameBytes, opts(Options{Lanes: 4}), defaultTuning(), plan{mode: cooperative, n: frameBytes, chunk: MiB, chunks: 3, lanes: 4, buffer: 2 * MiB, perBuffer: 2, buffers: 2, stripe: 256 << 10, stripes: 12}},
		// Small buffers: a chunk per buffer, cooperative while the buffers
		// fit in half the window.
		{2 * testChunk, opts(Options{Lanes: 4, ChunkSize: testChunk, WindowBytes: 4 * testChunk}), defaultTuning(), plan{mode: cooperative, n: 2 * testChunk, chunk: testChunk, chunks: 2, lanes: 2, buffer: testChunk, perBuffer: 1, buffers: 2, stripe: 64 << 10, stripes: 2}},
		{3 * testChunk, opts(Options{Lanes: 4, ChunkSize: testChunk, WindowBytes: 4 * testChunk}), defaultTuning(), plan{mode: chunked, n: 3 * testChunk, chunk: testChunk, chunks: 3, lanes: 3, buffer: testChunk, depth: 2}},
		// A buffer that is not a multiple of the chunk: two chunks a buffer.
		{5 * MiB, opts(Options{Lanes: 8, ChunkSize: 5 << 19}), defaultTuning(), plan{mode: cooperative, n: 5 * MiB, chunk: MiB, chunks: 5, lanes: 8, buffer: 5 << 19, perBuffer: 2, buffers: 3, stripe: 128 << 10, stripes: 40}},
		// Tunings: the cooperative mode off, or up to the whole window.
		{MiB, def, chunkedOnly(), plan{mode: chunked, n: MiB, chunk: 256 << 10, chunks: 4, lanes: 4, buffer: 2 * MiB, depth: 4}},
		{32 * MiB, def, tuning{coopChunk: MiB, coopShare: 1, minStripe: 64 << 10, minChunk: 256 << 10}, plan{mode: cooperative, n: 32 * MiB, chunk: MiB, chunks: 32, lanes: 8, buffer: 2 * MiB, perBuffer: 2, buffers: 16, stripe: 128 << 10, stripes: 256}},
	} {
		if got := planStaging(tc.n, tc.o, tc.tu); got != tc.want {
			t.Errorf("planStaging(%d, Lanes %d, ChunkSize %d, WindowBytes %d, %+v)\n got %+v\nwant %+v", tc.n, tc.o.Lanes, tc.o.ChunkSize, tc.o.WindowBytes, tc.tu, got, tc.want)
		}
	}
}

// TestPlanOneSwitch checks, for the default options and every size up to
// 64 MiB in 64 KiB steps, that the plan switches from cooperative to
// chunked once, where the staging stops fitting in half the window, and
// never back.
func TestPlanOneSwitch(t *testing.T) {
	o, _ := Options{Lanes: 8}.Defaults()
	last := cooperative
	for n := 64 << 10; n <= 64<<20; n += 64 << 10 {
		m := planStaging(n, o, defaultTuning()).mode
		if want := map[bool]mode{true: cooperative, false: chunked}[n <= int(o.WindowBytes)/2]; m != want {
			t.Fatalf("%d bytes: %v, want %v", n, m, want)
		}
		if last == chunked && m == cooperative {
			t.Fatalf("%d bytes: back to cooperative", n)
		}
		last = m
	}
}

// TestPlanCovers checks the plan's invariants on random sizes and
// options: the chunks cover the transfer exactly, a chunk fits its buffer,
// the stripes of a cooperative plan tile every chunk in order, its buffers
// fit in its share of the window, and the lanes are between 1 and Lanes.
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
		p := planStaging(n, o, defaultTuning())
		what := fmt.Sprintf("n %d, Lanes %d, ChunkSize %d, WindowBytes %d: %+v", n, o.Lanes, o.ChunkSize, o.WindowBytes, p)
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
		if p.buffers*p.perBuffer < p.chunks || p.buffers > o.Slots()/2 || p.perBuffer*p.chunk > p.buffer {
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
