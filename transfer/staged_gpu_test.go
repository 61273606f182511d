package transfer

// GPU tests of the transfer engine with the default options (2 MiB chunks,
// a 32 MiB window, up to 8 lanes, DirectBelow 1 MiB): byte-exact checks of
// every size boundary of the pool and of the engine in both directions, the
// path choice, concurrent transfers, cancellation and Close racing
// transfers. Like the other GPU tests they skip without a CUDA driver or
// device (newGPU) and run for real on the GPU host through
// scripts/gpu-run.sh.
//
// The data are checked against the driver's own synchronous copies
// (cuda.Context.CopyHtoD/CopyDtoH, MemsetD8), never against the copier
// under test. Destinations are pre-filled with the complement of the bytes
// expected, so every byte a copy fails to write differs, and have guard
// bytes of a known pattern on both sides (on the device for host to device,
// canaries in a larger host slice for device to host), so every byte written
// outside the range shows.
//
// Helpers of this file carry the prefix sgt (staged GPU test).

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/internal/sizeclass"
)

const (
	// sgtMinChunk is the smallest chunk of the chunked mode
	// (tuning.minChunk).
	sgtMinChunk = 256 << 10
	// sgtFrame is one 1080p NV12 frame (1920×1080×1.5 bytes): 8 lanes of
	// 388,800 bytes with the defaults.
	sgtFrame = 3_110_400
	// sgtLargest is the largest copy of the size table: 64 MiB and an odd
	// tail.
	sgtLargest = 64<<20 + 17
	// sgtGuard is the number of guard bytes on each side of a destination.
	sgtGuard = 4096
	// sgtDevFill is the device guard pattern, sgtCanary the host one.
	sgtDevFill byte = 0x5A
	sgtCanary  byte = 0xC3
)

// TestGPUStagedSizes checks the promise that a copy moves exactly its bytes,
// no more and no fewer, in both directions, at every size where the pool or
// the engine changes behaviour: every pool size-class boundary (c-1, c, c+1
// for each class size c up to twice the 2 MiB staging buffer, the page,
// LinearMax, SlabMax and SlabSize classes among them, then the powers of
// two up to 64 MiB), and the engine's own: 1, 63, 64, 4095..4097, sgtMinChunk±1,
// ChunkSize±1, 2*ChunkSize±1, Lanes*sgtMinChunk±1 (where chunks stop being
// sgtMinChunk), Lanes*ChunkSize±1 (where they reach ChunkSize), WindowBytes±1,
// WindowBytes/2±1 (the largest cooperative transfer),
// WindowBytes+ChunkSize+1, a 1080p frame and 64 MiB+17. It runs twice:
// "forced-staged" is the default options with DirectBelow: -1, so that every
// size, from 1 byte, goes through the staged path; "defaults" is Options{},
// direct below 2 MiB and staged from there. A few sizes are also copied from
// and to host slices 1 and 7 bytes past a page boundary, and to odd device
// addresses. PathOf and Stats().Last must report the path each copy took.
func TestGPUStagedSizes(t *testing.T) {
	g := newGPU(t, cudahost.Options{})
	ctx := context.Background()
	dev := g.devMem(t, sgtLargest+2*sgtGuard+64)
	// Sources are slices of one random buffer, at offsets that keep their
	// alignment modulo a page; comp holds the complements.
	rnd := alignedBytes(sgtLargest + 8*4096 + 64)
	copy(rnd, randomBytes(len(rnd), 2026))
	comp := make([]byte, len(rnd))
	sgtNot(comp, rnd)
	back := make([]byte, sgtLargest+2*sgtGuard)
	host := alignedBytes(sgtLargest + 2*sgtGuard + 64) // device-to-host destinations, canaries around them
	devGuard := bytes.Repeat([]byte{sgtDevFill}, sgtGuard)
	hostGuard := bytes.Repeat([]byte{sgtCanary}, sgtGuard)
	for _, cfg := range []struct {
		name string
		opt  Options
	}{
		{"forced-staged", Options{DirectBelow: -1}}, // every size staged
		{"defaults", Options{}},                     // direct below 2 MiB, staged from there
	} {
		t.Run(cfg.name, func(t *testing.T) {
			c := g.copier(t, cfg.opt)
			o := c.Options()
			if o.ChunkSize != DefaultChunkSize || o.WindowBytes != DefaultWindowBytes {
				t.Fatalf("options %+v are not the defaults", o)
			}
			sizes := sgtBoundaries(o)
			unaligned := map[int]bool{1: true, 63: true, 4097: true, sgtMinChunk + 1: true,
				o.ChunkSize - 1: true, o.ChunkSize + 1: true, sgtFrame: true,
				o.Lanes*o.ChunkSize + 1: true, sgtLargest: true}
			t.Logf("%d sizes, Lanes %d", len(sizes), o.Lanes)
			var bytesMoved int64
			for i, n := range sizes {
				path := PathStaged
				if o.DirectBelow > 0 && n < o.DirectBelow {
					path = PathDirect
				}
				variants := [][2]int{{0, 0}} // host offset from a page boundary, device offset
				if unaligned[n] {
					variants = append(variants, [2]int{1, 0}, [2]int{7, 5})
				}
				for _, v := range variants {
					hostOff, devOff := v[0], v[1]
					a := hostOff + 4096*(i%8) // a different source per size, same alignment
					src, pre := rnd[a:a+n], comp[a:a+n]
					d := dev.Ptr() + cuda.DevicePtr(sgtGuard+devOff)
					what := fmt.Sprintf("%d bytes (%v, host offset %d, device offset %d)", n, path, hostOff, devOff)
					if p := c.PathOf(src); p != path {
						t.Fatalf("%s: PathOf = %v", what, p)
					}

					// Host to device, into the complement with guards around.
					sgtMust(t, g.ctx.MemsetD8(d-sgtGuard, sgtDevFill, sgtGuard))
					sgtMust(t, g.ctx.MemsetD8(d+cuda.DevicePtr(n), sgtDevFill, sgtGuard))
					sgtMust(t, g.ctx.CopyHtoD(d, pre))
					if err := c.ToDevice(ctx, d, src); err != nil {
						t.Fatalf("H2D %s: %v", what, err)
					}
					sgtLast(t, c, HostToDevice, path, n)
					b := back[:n+2*sgtGuard]
					sgtMust(t, g.ctx.CopyDtoH(b, d-sgtGuard))
					sameBytes(t, "H2D "+what+": device guard before", b[:sgtGuard], devGuard)
					sameBytes(t, "H2D "+what, b[sgtGuard:sgtGuard+n], src)
					sameBytes(t, "H2D "+what+": device guard after", b[sgtGuard+n:], devGuard)

					// Device to host: the device holds src now (just
					// checked); the destination holds the complement,
					// between canaries. Its capacity runs on into the
					// canaries, so a copy past len shows too.
					lo := sgtGuard + hostOff
					sgtFill(host[lo-sgtGuard:lo], sgtCanary)
					copy(host[lo:lo+n], pre)
					sgtFill(host[lo+n:lo+n+sgtGuard], sgtCanary)
					if err := c.FromDevice(ctx, host[lo:lo+n], d); err != nil {
						t.Fatalf("D2H %s: %v", what, err)
					}
					sgtLast(t, c, DeviceToHost, path, n)
					sameBytes(t, "D2H "+what+": host canary before", host[lo-sgtGuard:lo], hostGuard)
					sameBytes(t, "D2H "+what, host[lo:lo+n], src)
					sameBytes(t, "D2H "+what+": host canary after", host[lo+n:lo+n+sgtGuard], hostGuard)
					bytesMoved += 2 * int64(n)
				}
			}
			st := c.Stats()
			if st.Failed != 0 || st.Canceled != 0 || st.StagingBytes != 0 || st.PeakStaging > st.WindowBytes {
				t.Errorf("stats: %d failed, %d cancelled, %d staging bytes held, peak %d of a %d window",
					st.Failed, st.Canceled, st.StagingBytes, st.PeakStaging, st.WindowBytes)
			}
			if sum := st.ToDevice.Total().Bytes + st.FromDevice.Total().Bytes; sum != bytesMoved {
				t.Errorf("stats count %d bytes, the test moved %d", sum, bytesMoved)
			}
			t.Logf("H2D %+v, D2H %+v, %d chunks, peak staging %d", st.ToDevice.Total(), st.FromDevice.Total(), st.Chunks, st.PeakStaging)
		})
	}
	poolIdle(t, g.pool, "after the size table", true)
}

// TestGPUStagedPaths checks the path promise of the default options for
// pageable memory: with Options{} a copy below DirectBelow (1 MiB) takes
// the driver's direct copy and one from 2 MiB the staged path, with
// Options{DirectBelow: -1} every copy is staged; PathOf says so beforehand,
// Stats counts each copy (and its bytes) under that path and Last names it,
// and both paths lay the bytes out the same: every size goes up with one
// copier and comes back with each, checked on the device by the checksum
// kernel and byte for byte on return.
func TestGPUStagedPaths(t *testing.T) {
	g := newGPU(t, cudahost.Options{})
	ctx := context.Background()
	auto := g.copier(t, Options{})                  // defaults: direct below 2 MiB, staged from there
	forced := g.copier(t, Options{DirectBelow: -1}) // defaults, staged path forced
	db := auto.Options().DirectBelow
	if db != DefaultDirectBelow {
		t.Fatalf("default DirectBelow %d, want %d", db, DefaultDirectBelow)
	}
	sizes := []int{1, 64, 4097, sgtMinChunk - 1, sgtMinChunk + 1, db - 1, db, db + 1, sgtFrame, 16<<20 + 1, sgtLargest}
	dev := g.devMem(t, sgtLargest)
	want := func(c *Copier, n int) Path {
		if c == auto && n < db {
			return PathDirect
		}
		return PathStaged
	}
	type key struct {
		c *Copier
		d Direction
		p Path
	}
	count, moved := map[key]uint64{}, map[key]int64{}
	for i, n := range sizes {
		src := randomBytes(n, uint64(i)+500)
		pre := make([]byte, n)
		sgtNot(pre, src)
		for _, pair := range [][2]*Copier{{auto, auto}, {forced, forced}, {auto, forced}, {forced, auto}} {
			up, down := pair[0], pair[1]
			what := fmt.Sprintf("%d bytes up %v, down %v", n, want(up, n), want(down, n))
			for _, c := range pair {
				if p := c.PathOf(src); p != want(c, n) {
					t.Fatalf("%s: PathOf = %v, want %v", what, p, want(c, n))
				}
			}
			sgtMust(t, g.ctx.CopyHtoD(dev.Ptr(), pre))
			if err := up.ToDevice(ctx, dev.Ptr(), src); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			sgtLast(t, up, HostToDevice, want(up, n), n)
			g.checkDevice(t, what, dev.Ptr(), src)
			got := bytes.Clone(pre)
			if err := down.FromDevice(ctx, got, dev.Ptr()); err != nil {
				t.Fatalf("%s, back: %v", what, err)
			}
			sgtLast(t, down, DeviceToHost, want(down, n), n)
			sameBytes(t, what+", back", got, src)
			for _, k := range []key{{up, HostToDevice, want(up, n)}, {down, DeviceToHost, want(down, n)}} {
				count[k]++
				moved[k] += int64(n)
			}
		}
	}
	for name, c := range map[string]*Copier{"defaults": auto, "forced-staged": forced} {
		st := c.Stats()
		for _, d := range []Direction{HostToDevice, DeviceToHost} {
			ds := st.ToDevice
			if d == DeviceToHost {
				ds = st.FromDevice
			}
			for _, p := range []Path{PathDirect, PathStaged, PathPinned, PathRegistered} {
				k, ps := key{c, d, p}, sgtPathStats(ds, p)
				if ps.Transfers != count[k] || ps.Bytes != moved[k] {
					t.Errorf("%s: %v %v: stats count %d transfers of %d bytes, want %d of %d", name, d, p, ps.Transfers, ps.Bytes, count[k], moved[k])
				}
			}
		}
		if st.Failed != 0 || st.Canceled != 0 || st.StagingBytes != 0 {
			t.Errorf("%s: %d failed, %d cancelled, %d staging bytes held", name, st.Failed, st.Canceled, st.StagingBytes)
		}
	}
	poolIdle(t, g.pool, "after the round trips", true)
}

// TestGPUStagedConcurrent checks that transfers running at once never mix
// up their bytes or their accounting: 16 goroutines copy to and from
// disjoint device ranges at the same time on one copier (Options{}: sizes
// below 2 MiB direct, the others staged, sharing its streams and window),
// while 4 more do the same on a second copier over the same pool
// (Options{DirectBelow: -1}: every copy staged), each direction both
// synchronous and asynchronous, every byte checked. Afterwards each range
// holds its goroutine's last bytes and the gaps between ranges are
// untouched; each copier's Stats count exactly the transfers, bytes and
// staging chunks of each direction and path, with no failure and no
// staging held; and the pool has no buffer in use.
func TestGPUStagedConcurrent(t *testing.T) {
	g := newGPU(t, cudahost.Options{})
	ctx := context.Background()
	copiers := [2]*Copier{
		g.copier(t, Options{}),                // defaults: direct below 2 MiB, staged from there
		g.copier(t, Options{DirectBelow: -1}), // defaults, staged path forced
	}
	const (
		onFirst, onSecond = 16, 4 // goroutines per copier
		rounds            = 4
		slot              = 34 << 20 // device bytes per goroutine: its largest copy and a gap
	)
	sizes := []int{1, 4097, 300<<10 + 5, 2<<20 - 1, 2<<20 + 1, sgtFrame, 5<<20 + 3, 16<<20 + 1, 33<<20 + 9}
	nG := onFirst + onSecond
	dev := g.devMem(t, nG*slot)
	sgtMust(t, g.ctx.MemsetD8(dev.Ptr(), sgtDevFill, nG*slot))

	type tally struct {
		n, bytes [2][numPaths]atomic.Int64 // by direction and path
		chunks   atomic.Int64              // the fewest chunks the staged copies can count
		chunksHi atomic.Int64              // and the most
	}
	var tallies [2]tally
	last := make([][]byte, nG) // each goroutine's last bytes sent
	reach := make([]int, nG)   // and the most bytes it wrote
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range nG {
		ci := 0
		if w >= onFirst {
			ci = 1
		}
		c, tl := copiers[ci], &tallies[ci]
		base := dev.Ptr() + cuda.DevicePtr(w*slot)
		wg.Go(func() {
			<-start
			o := c.Options()
			for i := range rounds {
				n := sizes[(w*5+i*3)%len(sizes)]
				path := PathStaged
				if o.DirectBelow > 0 && n < o.DirectBelow {
					path = PathDirect
				}
				what := fmt.Sprintf("goroutine %d (copier %d), round %d, %d bytes (%v)", w, ci, i, n, path)
				src := randomBytes(n, uint64(w*100+i+1))
				var err error
				if (w+i)%2 == 0 {
					err = c.ToDevice(ctx, base, src)
				} else {
					err = c.ToDeviceAsync(ctx, base, src).Wait()
				}
				if err != nil {
					t.Errorf("%s: H2D: %v", what, err)
					return
				}
				reach[w] = max(reach[w], n)
				got := make([]byte, n)
				sgtNot(got, src)
				if (w+i)%2 == 0 {
					err = c.FromDeviceAsync(ctx, got, base).Wait()
				} else {
					err = c.FromDevice(ctx, got, base)
				}
				if err != nil {
					t.Errorf("%s: D2H: %v", what, err)
					return
				}
				if err := bytesDiff(what, got, src); err != nil {
					t.Error(err)
					return
				}
				last[w] = src
				for d := range 2 {
					tl.n[d][path].Add(1)
					tl.bytes[d][path].Add(int64(n))
				}
				if path == PathStaged {
					// By the plan, or chunked when the window could not
					// give a cooperative transfer all its staging at once.
					// The lanes, and so the chunks, depend on how many
					// transfers stage at once: count the range.
					lo, hi := int64(math.MaxInt64), int64(0)
					for _, d := range []Direction{HostToDevice, DeviceToHost} {
						for active := 1; active <= 2*nG; active++ {
							for _, tu := range []tuning{defaultTuning(), chunkedOnly()} {
								k := int64(planStaging(n, d, active, false, o, tu).chunks)
								lo, hi = min(lo, k), max(hi, k)
							}
						}
					}
					tl.chunks.Add(2 * lo)
					tl.chunksHi.Add(2 * hi)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}

	// Disjoint ranges: each holds its goroutine's last bytes, and nothing
	// past what that goroutine wrote changed.
	all := make([]byte, nG*slot)
	sgtMust(t, g.ctx.CopyDtoH(all, dev.Ptr()))
	fill := bytes.Repeat([]byte{sgtDevFill}, slot)
	for w := range nG {
		s := all[w*slot : (w+1)*slot]
		sameBytes(t, fmt.Sprintf("goroutine %d's range", w), s[:len(last[w])], last[w])
		sameBytes(t, fmt.Sprintf("gap after goroutine %d's range", w), s[reach[w]:], fill[reach[w]:])
	}

	for ci, c := range copiers {
		st, tl := c.Stats(), &tallies[ci]
		for d, ds := range []DirectionStats{st.ToDevice, st.FromDevice} {
			for _, p := range []Path{PathDirect, PathStaged, PathPinned, PathRegistered} {
				ps := sgtPathStats(ds, p)
				if ps.Transfers != uint64(tl.n[d][p].Load()) || ps.Bytes != tl.bytes[d][p].Load() {
					t.Errorf("copier %d, %v %v: stats count %d transfers of %d bytes, the goroutines made %d of %d",
						ci, Direction(d), p, ps.Transfers, ps.Bytes, tl.n[d][p].Load(), tl.bytes[d][p].Load())
				}
			}
		}
		if st.Chunks < uint64(tl.chunks.Load()) || st.Chunks > uint64(tl.chunksHi.Load()) {
			t.Errorf("copier %d: stats count %d chunks, the staged copies had %d to %d", ci, st.Chunks, tl.chunks.Load(), tl.chunksHi.Load())
		}
		if st.Failed != 0 || st.Canceled != 0 {
			t.Errorf("copier %d: %d failed, %d cancelled", ci, st.Failed, st.Canceled)
		}
		// Both directions at once: a window each.
		if st.StagingBytes != 0 || st.PeakStaging > 2*st.WindowBytes || st.WindowBytes != DefaultWindowBytes {
			t.Errorf("copier %d: %d staging bytes held after all returned, peak %d, window %d per direction (want %d)",
				ci, st.StagingBytes, st.PeakStaging, st.WindowBytes, int64(DefaultWindowBytes))
		}
		t.Logf("copier %d: %d chunks, %d staging waits (%v), peak staging %d", ci, st.Chunks, st.StagingWaits, st.StagingWaitTime, st.PeakStaging)
	}
	poolIdle(t, g.pool, "after the concurrent transfers", true)
}

// TestGPUStagedCancel checks the cancellation promises of the staged path
// with Options{} (every copy of the loop is 2 MiB or more, so staged; the
// small copies of the not-started case go direct), in both directions,
// synchronous and asynchronous (Transfer.Wait, and Done agreeing with it):
//   - a context done before the call: the error wraps context.Canceled and
//     no byte moved;
//   - a context that ends during the copy (a deadline of up to 1 ms, or a
//     cancel from another goroutine once the first chunk is issued, after
//     up to 0.5 ms more): either the copy completed and every byte is right,
//     or the error starts with "transfer: ", wraps the context's error and
//     not ErrCopy, and the destination holds nothing but expected bytes and
//     its old ones (its complement) and does not change once the call has
//     returned (no chunk left in flight);
//   - either way no byte outside the range changed, the copier holds no
//     staging and the pool no buffer once the call returns; a following full
//     copy is byte-exact, Stats count every cancellation and completion and
//     no failure, and Close returns nil.
//
// The loop runs at most 300 copies or 1.5 s per direction and mode.
func TestGPUStagedCancel(t *testing.T) {
	g := newGPU(t, cudahost.Options{})
	bg := context.Background()
	const (
		maxN     = 40 << 20 // above the 32 MiB window: one copy alone waits for window slots
		maxIters = 300
	)
	budget := 1500 * time.Millisecond
	if testing.Short() {
		budget = 300 * time.Millisecond
	}
	rnd := randomBytes(maxN+1<<20, 4242)
	comp := make([]byte, len(rnd))
	sgtNot(comp, rnd)
	devH := g.devMem(t, maxN+2*sgtGuard) // host-to-device destination, guards around it
	devD := g.devMem(t, len(rnd))        // device-to-host source: rnd
	sgtMust(t, g.ctx.CopyHtoD(devD.Ptr(), rnd))
	devGuard := bytes.Repeat([]byte{sgtDevFill}, sgtGuard)
	hostGuard := bytes.Repeat([]byte{sgtCanary}, sgtGuard)
	back := make([]byte, maxN+2*sgtGuard)
	hostBuf := alignedBytes(maxN + 2*sgtGuard + 64) // device-to-host destination, canaries around it

	for _, dir := range []Direction{HostToDevice, DeviceToHost} {
		for _, async := range []bool{false, true} {
			mode := "sync"
			if async {
				mode = "async"
			}
			t.Run(dir.String()+"/"+mode, func(t *testing.T) {
				c := g.copier(t, Options{}) // defaults; see above for the paths
				seed := uint64(time.Now().UnixNano())
				rng := rand.New(rand.NewPCG(seed, uint64(dir)))
				t.Logf("seed %d", seed)
				d := devH.Ptr() + sgtGuard
				call := func(ctx context.Context, host []byte, p cuda.DevicePtr) error {
					var tr *Transfer
					switch {
					case !async && dir == HostToDevice:
						return c.ToDevice(ctx, p, host)
					case !async:
						return c.FromDevice(ctx, host, p)
					case dir == HostToDevice:
						tr = c.ToDeviceAsync(ctx, p, host)
					default:
						tr = c.FromDeviceAsync(ctx, host, p)
					}
					err := tr.Wait()
					if done, derr := tr.Done(); !done || derr != err {
						t.Errorf("Done after Wait = %v, %v; Wait returned %v", done, derr, err)
					}
					return err
				}
				// prepare pre-fills the destination of an n-byte copy whose
				// source starts at shift in rnd, and returns the host slice
				// the copy reads or writes, the device address, the bytes
				// wanted and the check of the destination.
				prepare := func(n, shift, hostOff int) (host []byte, p cuda.DevicePtr, want []byte, dst func() []byte) {
					want = rnd[shift : shift+n]
					if dir == HostToDevice {
						sgtMust(t, g.ctx.MemsetD8(d-sgtGuard, sgtDevFill, sgtGuard))
						sgtMust(t, g.ctx.MemsetD8(d+cuda.DevicePtr(n), sgtDevFill, sgtGuard))
						sgtMust(t, g.ctx.CopyHtoD(d, comp[shift:shift+n]))
						return want, d, want, func() []byte {
							b := back[:n+2*sgtGuard]
							sgtMust(t, g.ctx.CopyDtoH(b, d-sgtGuard))
							sameBytes(t, fmt.Sprintf("%d bytes: device guard before", n), b[:sgtGuard], devGuard)
							sameBytes(t, fmt.Sprintf("%d bytes: device guard after", n), b[sgtGuard+n:], devGuard)
							return b[sgtGuard : sgtGuard+n]
						}
					}
					lo := sgtGuard + hostOff
					sgtFill(hostBuf[lo-sgtGuard:lo], sgtCanary)
					copy(hostBuf[lo:lo+n], comp[shift:shift+n])
					sgtFill(hostBuf[lo+n:lo+n+sgtGuard], sgtCanary)
					return hostBuf[lo : lo+n], devD.Ptr() + cuda.DevicePtr(shift), want, func() []byte {
						sameBytes(t, fmt.Sprintf("%d bytes: host canary before", n), hostBuf[lo-sgtGuard:lo], hostGuard)
						sameBytes(t, fmt.Sprintf("%d bytes: host canary after", n), hostBuf[lo+n:lo+n+sgtGuard], hostGuard)
						return hostBuf[lo : lo+n]
					}
				}
				quiet := func(what string) {
					t.Helper()
					// A download's lanes may give its staging back just
					// after it returns (the handoff, coop.go).
					if n := settledStaging(c); n != 0 {
						t.Fatalf("%s: %d staging bytes still held after the call returned", what, n)
					}
					if st := g.pool.Stats(); st.BytesInUse != 0 {
						t.Fatalf("%s: %d pool bytes in use after the call returned", what, st.BytesInUse)
					}
				}

				// Cancelled before the call: nothing moves.
				var notStarted uint64
				for _, n := range []int{1, 4097, 3<<20 + 1, maxN} {
					host, p, _, dst := prepare(n, 64, 1)
					ctx, cancel := context.WithCancel(bg)
					cancel()
					err := call(ctx, host, p)
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("%d bytes with a cancelled context: %v, want context.Canceled", n, err)
					}
					notStarted++
					sameBytes(t, fmt.Sprintf("%d bytes cancelled before the start: destination", n), dst(), comp[64:64+n])
					quiet(fmt.Sprintf("%d bytes cancelled before the start", n))
				}

				// Cancelled during the copy.
				var completed, cancelled uint64
				t0 := time.Now()
				for it := 0; it < maxIters && time.Since(t0) < budget; it++ {
					n := 2<<20 + rng.IntN(10<<20) // mostly a few chunks
					if it%4 == 3 {
						n = 2<<20 + rng.IntN(maxN-2<<20+1) // up to past the window
					}
					shift := rng.IntN(1 << 20)
					host, p, want, dst := prepare(n, shift, rng.IntN(8))
					if pa := c.PathOf(host); pa != PathStaged {
						t.Fatalf("%d bytes: PathOf = %v, want staged", n, pa)
					}
					var (
						ctx      context.Context
						cancel   context.CancelFunc
						wantErr  error
						finished = make(chan struct{})
						stopped  = make(chan struct{})
					)
					if it%2 == 0 {
						ctx, cancel = context.WithTimeout(bg, time.Duration(rng.Int64N(int64(time.Millisecond))))
						wantErr = context.DeadlineExceeded
						close(stopped)
					} else {
						ctx, cancel = context.WithCancel(bg)
						wantErr = context.Canceled
						pause := time.Duration(rng.Int64N(int64(500 * time.Microsecond)))
						chunks0 := c.Stats().Chunks
						go func() {
							defer close(stopped)
							defer cancel()
							// Wait for the first chunk (or the end of the copy).
							for c.Stats().Chunks == chunks0 {
								select {
								case <-finished:
									return
								default:
									runtime.Gosched()
								}
							}
							time.Sleep(pause)
						}()
					}
					err := call(ctx, host, p)
					close(finished)
					<-stopped
					cancel()
					what := fmt.Sprintf("copy %d, %d bytes", it, n)
					got := dst()
					if err == nil {
						completed++
						sameBytes(t, what+", completed", got, want)
						quiet(what)
						continue
					}
					cancelled++
					if !errors.Is(err, wantErr) || errors.Is(err, ErrCopy) || !strings.HasPrefix(err.Error(), "transfer: ") {
						t.Fatalf("%s: error %q, want a transfer error wrapping %v", what, err, wantErr)
					}
					if i := sgtMixed(got, want); i >= 0 {
						t.Fatalf("%s, cancelled: byte %d is %#x, neither the one sent (%#x) nor the old one (%#x)", what, i, got[i], want[i], ^want[i])
					}
					// Nothing may land once the call has returned.
					snap := bytes.Clone(got)
					sgtMust(t, g.ctx.Synchronize())
					sameBytes(t, what+", cancelled: destination changed after the call returned", dst(), snap)
					quiet(what)
				}
				t.Logf("%d copies in %v: %d completed, %d cancelled", completed+cancelled, time.Since(t0).Round(time.Millisecond), completed, cancelled)

				// The copier and the pool are still good: a full copy.
				host, p, want, dst := prepare(maxN, 12345, 3)
				if err := call(bg, host, p); err != nil {
					t.Fatalf("full copy after the cancellations: %v", err)
				}
				sameBytes(t, "full copy after the cancellations", dst(), want)
				completed++

				st := c.Stats()
				ds := st.ToDevice
				if dir == DeviceToHost {
					ds = st.FromDevice
				}
				if st.Failed != 0 || st.Canceled != notStarted+cancelled || ds.Staged.Transfers != completed || ds.Direct.Transfers != 0 {
					t.Errorf("stats: %d failed, %d cancelled, %d staged, %d direct; want 0, %d, %d, 0",
						st.Failed, st.Canceled, ds.Staged.Transfers, ds.Direct.Transfers, notStarted+cancelled, completed)
				}
				if err := c.Close(); err != nil {
					t.Fatalf("Close after the cancellations: %v", err)
				}
				if err := c.Close(); !errors.Is(err, ErrClosed) {
					t.Errorf("second Close: %v, want ErrClosed", err)
				}
				if err := call(bg, host, p); !errors.Is(err, ErrClosed) {
					t.Errorf("copy after Close: %v, want ErrClosed", err)
				}
				poolIdle(t, g.pool, "after Close", true)
			})
		}
	}
}

// TestGPUStagedCloseRace checks Close against transfers in flight, with
// Options{} (the 4097-byte and 1 MiB copies go direct, the others staged):
// asynchronous copies of both directions are started one by one while
// Close runs, and synchronous ones loop on other goroutines. Close returns
// nil, and when it has returned every transfer is Done; each transfer either
// completed byte-exact, or was refused with ErrClosed without moving a byte,
// or (a third of them have a deadline of up to 2 ms) was cut short with
// the deadline's error leaving only expected or old bytes; the copier holds
// no staging after Close, nothing failed, and the pool has no buffer in use.
// Rounds of a fresh copier over one pool repeat for at most 2 s.
func TestGPUStagedCloseRace(t *testing.T) {
	g := newGPU(t, cudahost.Options{})
	bg := context.Background()
	sizes := []int{4097, 1<<20 + 3, 2<<20 + 1, sgtFrame, 9<<20 + 7, 24<<20 + 5}
	const (
		syncers   = 4
		slot      = 25 << 20
		maxRounds = 60
	)
	jobs := 2 * len(sizes) // the first half host to device, the rest device to host
	budget := 2 * time.Second
	if testing.Short() {
		budget = 400 * time.Millisecond
	}
	rnd := randomBytes(slot+1<<20, 99)
	comp := make([]byte, len(rnd))
	sgtNot(comp, rnd)
	dev := g.devMem(t, (jobs+syncers)*slot)
	slotPtr := func(j int) cuda.DevicePtr { return dev.Ptr() + cuda.DevicePtr(j*slot) }
	size := func(j int) int { return sizes[j%len(sizes)] }
	isH2D := func(j int) bool { return j < len(sizes) }
	// The device-to-host jobs read rnd at offset 64*j, put there once.
	dsts := make([][]byte, jobs)
	for j := range jobs {
		if !isH2D(j) {
			sgtMust(t, g.ctx.CopyHtoD(slotPtr(j), rnd[64*j:64*j+size(j)]))
			dsts[j] = make([]byte, size(j))
		}
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 5))
	t.Logf("seed %d", seed)

	var completed, refused, timedOut int
	t0 := time.Now()
	for round := 0; round < maxRounds && time.Since(t0) < budget; round++ {
		c := g.copier(t, Options{}) // defaults; see above for the paths
		// Sources and pre-filled destinations of the round.
		want := make([][]byte, jobs)
		deadline := make([]time.Duration, jobs)
		for j := range jobs {
			n := size(j)
			shift := 64 * j
			if isH2D(j) {
				shift = (round*4096 + 64*j) % (1 << 20)
				sgtMust(t, g.ctx.CopyHtoD(slotPtr(j), comp[shift:shift+n]))
			} else {
				copy(dsts[j], comp[shift:shift+n])
			}
			want[j] = rnd[shift : shift+n]
			if j%3 == 2 {
				deadline[j] = time.Duration(1 + rng.Int64N(int64(2*time.Millisecond)))
			}
		}
		gaps := make([]time.Duration, jobs)
		for j := range gaps {
			gaps[j] = time.Duration(rng.Int64N(int64(300 * time.Microsecond)))
		}
		closeAfter := time.Duration(rng.Int64N(int64(3 * time.Millisecond)))

		var wg sync.WaitGroup
		trs := make([]*Transfer, jobs)
		cancels := make([]context.CancelFunc, jobs)
		wg.Go(func() { // the launcher
			for j := range jobs {
				ctx := bg
				if deadline[j] > 0 {
					ctx, cancels[j] = context.WithTimeout(bg, deadline[j])
				}
				if isH2D(j) {
					trs[j] = c.ToDeviceAsync(ctx, slotPtr(j), want[j])
				} else {
					trs[j] = c.FromDeviceAsync(ctx, dsts[j], slotPtr(j))
				}
				time.Sleep(gaps[j])
			}
		})
		for s := range syncers {
			p := slotPtr(jobs + s)
			wg.Go(func() {
				for k := 0; k < 10000; k++ {
					m := []int{64<<10 + 1, 3<<20 + 1}[(s+k)%2]
					src := rnd[64*k%(1<<20):][:m]
					if err := c.ToDevice(bg, p, src); errors.Is(err, ErrClosed) {
						return
					} else if err != nil {
						t.Errorf("syncer %d, %d bytes: %v", s, m, err)
						return
					}
					got := make([]byte, m)
					if err := c.FromDevice(bg, got, p); errors.Is(err, ErrClosed) {
						return
					} else if err != nil {
						t.Errorf("syncer %d, %d bytes back: %v", s, m, err)
						return
					}
					if err := bytesDiff(fmt.Sprintf("round %d, syncer %d, %d bytes", round, s, m), got, src); err != nil {
						t.Error(err)
						return
					}
				}
				t.Errorf("syncer %d: 10000 round trips and the copier still not closed", s)
			})
		}
		time.Sleep(closeAfter)
		if err := c.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		if tr := c.ToDeviceAsync(bg, slotPtr(0), want[0]); !errors.Is(tr.Wait(), ErrClosed) {
			t.Errorf("round %d: a copy started after Close: %v, want ErrClosed", round, tr.Wait())
		}
		wg.Wait()
		for j, tr := range trs {
			if done, _ := tr.Done(); !done {
				t.Errorf("round %d, transfer %d still running after Close returned", round, j)
			}
		}
		for j, tr := range trs {
			err := tr.Wait()
			if cancels[j] != nil {
				cancels[j]()
			}
			n := size(j)
			what := fmt.Sprintf("round %d, transfer %d (%v, %d bytes)", round, j, tr.Direction(), n)
			var got []byte
			if isH2D(j) {
				got = make([]byte, n)
				sgtMust(t, g.ctx.CopyDtoH(got, slotPtr(j)))
			} else {
				got = dsts[j]
			}
			switch {
			case err == nil:
				completed++
				if e := bytesDiff(what, got, want[j]); e != nil {
					t.Error(e)
				}
			case errors.Is(err, ErrClosed):
				refused++
				old := make([]byte, n)
				sgtNot(old, want[j])
				if e := bytesDiff(what+", refused with ErrClosed: destination", got, old); e != nil {
					t.Error(e)
				}
			case deadline[j] > 0 && errors.Is(err, context.DeadlineExceeded):
				timedOut++
				if i := sgtMixed(got, want[j]); i >= 0 {
					t.Errorf("%s, timed out: byte %d is %#x, neither the one sent (%#x) nor the old one (%#x)", what, i, got[i], want[j][i], ^want[j][i])
				}
			default:
				t.Errorf("%s: %v, want nil, ErrClosed or (with a deadline) a deadline error", what, err)
			}
		}
		if st := c.Stats(); st.StagingBytes != 0 || st.Failed != 0 {
			t.Errorf("round %d: after Close %d staging bytes held, %d transfers failed", round, st.StagingBytes, st.Failed)
		}
		if st := g.pool.Stats(); st.BytesInUse != 0 {
			t.Errorf("round %d: %d pool bytes in use after Close", round, st.BytesInUse)
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%v: %d transfers completed, %d refused with ErrClosed, %d timed out", time.Since(t0).Round(time.Millisecond), completed, refused, timedOut)
	poolIdle(t, g.pool, "after the Close races", true)
}

// sgtBoundaries returns the sizes of the size table for a copier with
// options o (defaults filled in), sorted and without duplicates; see
// TestGPUStagedSizes.
func sgtBoundaries(o Options) []int {
	set := map[int]bool{}
	add := func(ns ...int) {
		for _, n := range ns {
			if n > 0 && n <= sgtLargest {
				set[n] = true
			}
		}
	}
	around := func(n int) { add(n-1, n, n+1) }
	// The pool's size classes (internal/sizeclass, as pinpool.Pool maps
	// sizes outside Exact mode) up to twice the staging buffer: the page,
	// every page multiple to LinearMax, then eight per power of two, among
	// them SlabMax (1 MiB), the staging buffer's class and SlabSize.
	top := int64(2 * o.ChunkSize)
	for i := range sizeclass.Count() {
		c := sizeclass.Size(i)
		if c > top {
			break
		}
		around(int(c))
	}
	for p := 2 * top; p <= 64<<20; p *= 2 {
		around(int(p))
	}
	around(pinpool.DefaultSlabMax)
	around(pinpool.DefaultSlabSize)
	// The engine's own.
	add(1, 63, 64, 65, 4095, 4096, 4097)
	around(sgtMinChunk)
	around(o.ChunkSize)
	around(2 * o.ChunkSize)
	around(max(o.Lanes, 1) * sgtMinChunk)
	around(max(o.Lanes, 1) * o.ChunkSize)
	around(int(o.WindowBytes))
	around(int(o.WindowBytes) / 2)
	add(int(o.WindowBytes) + o.ChunkSize + 1)
	if o.DirectBelow > 0 {
		around(o.DirectBelow)
	}
	add(sgtFrame, sgtLargest)
	sizes := make([]int, 0, len(set))
	for n := range set {
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	return sizes
}

// sgtNot writes the complement of src into dst[:len(src)].
func sgtNot(dst, src []byte) {
	dst = dst[:len(src)]
	i := 0
	for ; i+8 <= len(src); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], ^binary.LittleEndian.Uint64(src[i:]))
	}
	for ; i < len(src); i++ {
		dst[i] = ^src[i]
	}
}

// sgtFill sets every byte of b to v.
func sgtFill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

// sgtMixed returns -1 when each byte of got is the byte of want or its
// complement (what a cut-short copy into a destination pre-filled with the
// complement may leave), else the first offset where it is neither.
func sgtMixed(got, want []byte) int {
	if len(got) != len(want) {
		return min(len(got), len(want))
	}
	i := 0
	for ; i+8 <= len(got); i += 8 {
		x := binary.LittleEndian.Uint64(got[i:]) ^ binary.LittleEndian.Uint64(want[i:])
		if x != (x&0x0101010101010101)*0xFF { // some byte neither 0x00 nor 0xFF
			break
		}
	}
	for ; i < len(got); i++ {
		if x := got[i] ^ want[i]; x != 0 && x != 0xFF {
			return i
		}
	}
	return -1
}

// sgtMust fails the test on a driver error of the test's own setup or
// checks.
func sgtMust(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// sgtLast checks that the copier's last transfer was n bytes of direction d
// on path p (for a copier used by one goroutine).
func sgtLast(tb testing.TB, c *Copier, d Direction, p Path, n int) {
	tb.Helper()
	if l := c.Stats().Last; l.Direction != d || l.Path != p || l.Bytes != int64(n) {
		tb.Fatalf("Stats().Last = %v %v %d bytes, want %v %v %d", l.Direction, l.Path, l.Bytes, d, p, n)
	}
}

// sgtPathStats returns the counters of path p.
func sgtPathStats(ds DirectionStats, p Path) PathStats {
	switch p {
	case PathDirect:
		return ds.Direct
	case PathStaged:
		return ds.Staged
	case PathPinned:
		return ds.Pinned
	}
	return ds.Registered
}
