package transfer

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/pinpool/pinpool/cudahost"
)

// TestGPUMixedMemory is the case of issue 17 on the GPU: a Go region with
// mem[0:8M] and mem[8M:16M] registered by Copier.Register (two adjacent
// registrations), and slices of it that span both, run past a
// registration's end, or end in pageable memory, round-tripped with the
// default options and with DirectBelow off. The driver refuses a copy that
// spans two registrations or leaves one, so passing proves the split. The
// bytes are checked against the driver's own synchronous copies, never
// against the copier, and the bytes of the region outside each slice must
// not change.
func TestGPUMixedMemory(t *testing.T) {
	g := newGPU(t, cudahost.Options{})
	ctx := context.Background()
	const M = 1 << 20
	mem := alignedBytes(20 * M)
	dev := g.devMem(t, 16*M)
	for _, opt := range []Options{{}, {DirectBelow: -1}} {
		t.Run(fmt.Sprintf("DirectBelow=%d", opt.DirectBelow), func(t *testing.T) {
			c := g.copier(t, opt)
			for _, r := range [][2]int{{0, 8 * M}, {8 * M, 16 * M}} {
				reg, err := c.Register(mem[r[0]:r[1]])
				if err != nil {
					t.Fatal(err)
				}
				defer reg.Close()
			}
			for i, s := range [][2]int{
				{4 * M, 12 * M},        // spans the two registrations
				{6 * M, 10 * M},        // likewise, smaller
				{1, 8*M + 1},           // runs past the first's end by a byte
				{16*M - 3, 16*M + 3},   // past the second's end: 6 bytes, direct by default
				{7 * M, 13 * M},        // the FromDevice case (both ways here)
				{15 * M, 17*M + 12345}, // out of the second into pageable memory
				{8*M - 1, 8*M + 1},     // the last byte of one, the first of the other
				{0, 16 * M},            // both, exactly
				{3, 20*M - 5},          // all of it, odd ends
			} {
				lo, hi := s[0], s[1]
				n := hi - lo
				if n > 16*M {
					n = 16 * M
					hi = lo + n
				}
				what := fmt.Sprintf("mem[%d:%d]", lo, hi)
				copy(mem, randomBytes(len(mem), uint64(i)))
				outside := append(bytes.Clone(mem[:lo]), mem[hi:]...)
				if err := c.ToDevice(ctx, dev.Ptr(), mem[lo:hi]); err != nil {
					t.Fatalf("%s to the device: %v", what, err)
				}
				got := make([]byte, n)
				sgtMust(t, g.ctx.CopyDtoH(got, dev.Ptr()))
				if err := bytesDiff(what+" on the device", got, mem[lo:hi]); err != nil {
					t.Fatal(err)
				}
				want := randomBytes(n, uint64(i)+100)
				sgtMust(t, g.ctx.CopyHtoD(dev.Ptr(), want))
				if err := c.FromDevice(ctx, mem[lo:hi], dev.Ptr()); err != nil {
					t.Fatalf("%s from the device: %v", what, err)
				}
				if err := bytesDiff(what+" back", mem[lo:hi], want); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(append(bytes.Clone(mem[:lo]), mem[hi:]...), outside) {
					t.Fatalf("%s: bytes outside the slice changed", what)
				}
				t.Logf("%s: path %v", what, c.PathOf(mem[lo:hi]))
			}
			if st := c.Stats(); st.Failed != 0 {
				t.Fatalf("%d transfers failed", st.Failed)
			}
		})
	}
}
