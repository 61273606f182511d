package transfer

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/pinpool/pinpool/cudahost"
)

// BenchmarkBothWays moves n bytes host to device and n bytes device to
// host at once, from two goroutines on disjoint pageable memory, and
// reports the bytes of both over the time (GB/s summed), as pinpool
// bench's "Transfers both" does: through one copier with the user's
// defaults, and through a copier per direction; beside them, in the same
// process, each direction alone and the pinned copy both ways (the link's
// ceiling). Each direction of a copier has standing lanes and a window of
// its own, so that one copier moves both ways as fast as two.
func BenchmarkBothWays(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	ctx := context.Background()
	sizes := []int{16 << 20, 64 << 20, 256 << 20}
	maxN := sizes[len(sizes)-1]
	dev1, dev2 := g.devMem(b, maxN), g.devMem(b, maxN)
	src, dst := randomBytes(maxN, 31), randomBytes(maxN, 32)
	one := g.copier(b, Options{DirectBelow: -1})
	other := g.copier(b, Options{DirectBelow: -1})
	p1, p2 := g.pinnedMem(b, maxN), g.pinnedMem(b, maxN)
	cases := []struct {
		name     string
		h2d, d2h *Copier // nil: that direction does not run
		in, out  []byte
	}{
		{"copier", one, one, src, dst},
		{"copier-per-direction", one, other, src, dst},
		{"h2d-alone", one, nil, src, dst},
		{"d2h-alone", nil, one, src, dst},
		{"pinned", one, one, p1, p2},
	}
	for _, n := range sizes {
		for _, tc := range cases {
			b.Run(fmt.Sprintf("size=%s/%s", sizeName(n), tc.name), func(b *testing.B) {
				defer allCPUs()()
				bytes := 0
				if tc.h2d != nil {
					bytes += n
				}
				if tc.d2h != nil {
					bytes += n
				}
				b.SetBytes(int64(bytes))
				both := func() {
					var wg sync.WaitGroup
					var e2 error
					if tc.d2h != nil {
						wg.Go(func() { e2 = tc.d2h.FromDevice(ctx, tc.out[:n], dev2.Ptr()) })
					}
					if tc.h2d != nil {
						if err := tc.h2d.ToDevice(ctx, dev1.Ptr(), tc.in[:n]); err != nil {
							b.Fatal(err)
						}
					}
					wg.Wait()
					if e2 != nil {
						b.Fatal(e2)
					}
				}
				// Untimed: the pool grows the staging buffers the case
				// needs (a second window the first time both directions
				// stage at once), which is not what this measures.
				both()
				for b.Loop() {
					both()
				}
				reportGBps(b, bytes)
			})
		}
	}
}
