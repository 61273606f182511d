package transfer

import (
	"context"
	"fmt"
	"testing"
	"unsafe"

	"github.com/pinpool/pinpool/cuda"
)

// The mixed-memory tests copy slices of one host region that holds, in
// order, pageable memory, memory pinned as a pool's would be, pageable
// memory, two adjacent registrations of the copier (each registered in
// parts), and pageable memory again: every slice, whatever kinds of memory
// it covers, must copy byte-exact both ways, and the fake device refuses
// (and records, failing the test) any copy a real driver would refuse.

// mixedPage is the unit of the mixed layout.
const mixedPage = 4096

// mixedLayout is the region: [0, 4) pageable, [4, 8) pinned (a fake pool
// span), [8, 10) pageable, [10, 18) registration A, [18, 26) registration
// B, [26, 40) pageable, in pages.
var mixedLayout = struct{ pinned, regA, regB [2]int }{
	pinned: [2]int{4, 8}, regA: [2]int{10, 18}, regB: [2]int{18, 26},
}

const mixedPages = 40

// newMixedEnv makes a copier with small chunks and registration parts of 4
// pages over the fake device, and the mixed region, registered.
func newMixedEnv(t testing.TB, directBelow int) (*env, []byte) {
	e := newEnv(t, Options{ChunkSize: 16 << 10, WindowBytes: 8 * 16 << 10, Lanes: 3, DirectBelow: directBelow, RegisterChunk: 4 * mixedPage})
	raw := make([]byte, (mixedPages+1)*mixedPage)
	skip := int(-uintptr(unsafe.Pointer(&raw[0])) & (mixedPage - 1))
	mem := raw[skip : skip+mixedPages*mixedPage]
	pg := func(r [2]int) []byte { return mem[r[0]*mixedPage : r[1]*mixedPage] }
	e.d.mu.Lock()
	e.d.pool = append(e.d.pool, span(pg(mixedLayout.pinned)))
	e.d.mu.Unlock()
	for _, r := range [][2]int{mixedLayout.regA, mixedLayout.regB} {
		reg, err := e.c.Register(pg(r))
		if err != nil {
			t.Fatal(err)
		}
		if reg.Parts() != 2 {
			t.Fatalf("registration of pages %v in %d parts, want 2", r, reg.Parts())
		}
	}
	return e, mem
}

// mixedRoundTrip copies mem[off:off+n] to the device and back (into the
// same slice, from other device bytes), checking every byte, and that no
// byte of mem outside the slice changed.
func mixedRoundTrip(t testing.TB, e *env, mem []byte, dev cuda.DevicePtr, off, n int, seed uint64) {
	t.Helper()
	ctx := context.Background()
	b := mem[off : off+n]
	copy(mem, randomBytes(len(mem), seed))
	before := append([]byte(nil), mem...)
	if err := e.c.ToDevice(ctx, dev, b); err != nil {
		t.Fatalf("[%d, %d) to the device: %v", off, off+n, err)
	}
	m, err := e.d.mem(dev, n) // not e.devBytes: t may be a fuzz target's
	if err != nil {
		t.Fatal(err)
	}
	sameBytes(t, fmt.Sprintf("[%d, %d) on the device", off, off+n), m, b)
	want := randomBytes(n, seed+1)
	copy(m, want)
	if err := e.c.FromDevice(ctx, b, dev); err != nil {
		t.Fatalf("[%d, %d) from the device: %v", off, off+n, err)
	}
	sameBytes(t, fmt.Sprintf("[%d, %d) back", off, off+n), b, want)
	sameBytes(t, fmt.Sprintf("before [%d, %d)", off, off+n), mem[:off], before[:off])
	sameBytes(t, fmt.Sprintf("after [%d, %d)", off, off+n), mem[off+n:], before[off+n:])
	if v := e.d.Violations(); len(v) > 0 {
		t.Fatalf("[%d, %d): the driver would refuse: %v", off, off+n, v)
	}
}

// TestMixedMemory copies, with DirectBelow off and on, slices that cover
// every mix of the layout's memory: inside one registration part, across
// parts, across the two registrations, past a registration's end, from
// pageable into a registration, from the pinned span into pageable memory,
// tiny ones (which take the direct path where DirectBelow allows) across
// each boundary, and the whole region.
func TestMixedMemory(t *testing.T) {
	P := mixedPage
	cases := [][2]int{
		{11 * P, 12 * P},          // inside one part of A
		{11 * P, 17 * P},          // across A's parts
		{14 * P, 22 * P},          // across A and B (the mem[4M:12M])
		{17 * P, 19 * P},          // across A and B, small (mem[6M:10M])
		{10*P + 1, 18*P + 1},      // past A's end by a byte (mem[1:8M+1])
		{26*P - 3, 26*P + 3},      // past B's end, 6 bytes (mem[16M-3:16M+3])
		{15 * P, 21 * P},          // the FromDevice into mem[7M:13M], scaled
		{10*P - 5, 12 * P},        // pageable into A
		{8*P - 3, 8*P + 3},        // out of the pinned span, 6 bytes
		{4 * P, 9 * P},            // the pinned span and pageable after it
		{3 * P, 8 * P},            // pageable, then the whole pinned span
		{18*P - 1, 18*P + 1},      // the two bytes either side of A|B
		{0, mixedPages * P},       // everything
		{1, mixedPages*P - 1},     // everything, odd
		{9 * P, 27 * P},           // both registrations with pageable around
		{4 * P, 8 * P},            // the pinned span alone
		{12*P + 7, 12*P + 8},      // one registered byte
		{25*P + 100, 30*P + 4095}, // B's end into pageable
	}
	for _, db := range []int{-1, 3000} {
		t.Run(fmt.Sprintf("DirectBelow=%d", db), func(t *testing.T) {
			e, mem := newMixedEnv(t, db)
			dev := e.d.alloc(len(mem))
			for i, c := range cases {
				mixedRoundTrip(t, e, mem, dev, c[0], c[1]-c[0], uint64(i))
			}
			st := e.c.Stats()
			if st.Failed != 0 || st.ToDevice.Total().Transfers != uint64(len(cases)) || st.FromDevice.Total().Transfers != uint64(len(cases)) {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestMixedPathOf checks the path PathOf reports for mixed memory: the
// path of the most bytes.
func TestMixedPathOf(t *testing.T) {
	P := mixedPage
	e, mem := newMixedEnv(t, 3000)
	for _, c := range []struct {
		lo, hi int
		want   Path
	}{
		{14 * P, 22 * P, PathRegistered},
		{10*P - 5, 10*P + 1, PathDirect}, // 5 pageable bytes, 1 registered
		{26*P - 3, 26*P + 3, PathRegistered},
		{26*P - 2, 26*P + 3, PathDirect},
		{4 * P, 8 * P, PathPinned},
		{8 * P, 8*P + 100, PathDirect},
		{8*P - 1, 8*P + 100, PathStaged}, // begins pinned: never direct
		{0, mixedPages * P, PathStaged},
	} {
		if got := e.c.PathOf(mem[c.lo:c.hi]); got != c.want {
			t.Errorf("[%d, %d): %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

// FuzzMixedMemory round-trips any slice of the mixed layout, with
// DirectBelow on.
func FuzzMixedMemory(f *testing.F) {
	P := mixedPage
	for _, s := range [][2]int{{14 * P, 8 * P}, {26*P - 3, 6}, {0, mixedPages * P}, {8*P - 1, 2}} {
		f.Add(uint32(s[0]), uint32(s[1]))
	}
	e, mem := newMixedEnv(f, 3000)
	dev := e.d.alloc(len(mem))
	f.Fuzz(func(t *testing.T, off, n uint32) {
		o := int(off) % len(mem)
		m := 1 + int(n)%(len(mem)-o)
		mixedRoundTrip(t, e, mem, dev, o, m, uint64(off)^uint64(n)<<20)
	})
}
