package transfer

import "time"

// Step 2 of a transfer: the staging plan, decided once by planStaging from the transfer's size and
// direction, the transfers staging at the time, the options and the tuning. A cooperative plan
// carries the chunked one the transfer runs by when its staging cannot all be had at once
// (plan.fallback): no transfer is planned twice.

// mode is how the lanes of a staged transfer share its work. Each of the two wins by far more than
// a second mechanism's margin where it is used: the cooperative mode within the window, uploads
// most (BenchmarkStagedSizes, plan=chunked-only beside the default), the chunked one above, where
// lanes that wait for each other at every chunk cap the rate well below independent lanes
// (BenchmarkStagedSizes, 64 MiB and up).
type mode int

const (
	// chunked: each lane takes whole chunks through staging, issue and completion on its own,
	// keeping a few in flight; lanes never wait for each other.
	chunked mode = iota
	// cooperative: the transfer holds all its staging at once and every lane copies stripes of
	// every chunk, which shortens the DMA's first and last chunk, most of a small transfer's time.
	cooperative
)

func (m mode) String() string { return [...]string{"chunked", "cooperative"}[m] }

// plan is how one staged transfer of n bytes runs.
type plan struct {
	mode   mode
	n      int // bytes of the transfer
	chunk  int // bytes of each chunk (the last may be shorter): one asynchronous copy
	chunks int
	lanes  int // lanes that work on it, the calling goroutine among them
	buffer int // bytes of a staging buffer: Options.ChunkSize, one window slot

	// streamOut: device to host and no other transfer staging that way, the bytes leave staging
	// with streaming stores (copyOut).
	streamOut bool
	// backToBack: device to host, cooperative, the direction's lanes awake. The caller issues the
	// copies before it offers the transfer to the lanes, which have nothing to do before the first
	// chunk lands (lanes asleep are offered it first, to wake while the copies are issued: woken
	// after, they came late and paced frames took longer); and each stripe of staging is evicted
	// once copied out (evictBytes), so that the next DMA into it, which comes at once, need not
	// chase its lines in the CPU caches (a paced stream's next DMA comes milliseconds later, and
	// there eviction made frames slower for more CPU time). BenchmarkFrameStream and
	// BenchmarkPacedFrames, downloads, measure both rules.
	backToBack bool
	// handoff: back to back and streamOut, the caller returns once its bytes are copied out, and its
	// lanes evict and give the staging back (coop.go). A second way to end a download, kept for its
	// gain beyond a second mechanism's margin on 1 MiB downloads back to back, and frames faster for
	// less CPU time (BenchmarkStagedSizes, BenchmarkFrameStream: plan=/copier=handoff-off).
	handoff bool

	depth int // chunked: chunks a lane keeps in flight before it completes its oldest

	perBuffer int // cooperative: chunks that share one staging buffer
	buffers   int // cooperative: staging buffers the transfer holds
	stripe    int // cooperative: bytes of a chunk that a lane copies at a time
	stripes   int // cooperative: stripes of the whole transfer

	alt cut // cooperative: the chunked plan of the same transfer, for fallback
}

// cut is a chunked plan's share of the work: its chunk, chunks, lanes and depth.
type cut struct{ chunk, chunks, lanes, depth int }

// fallback is the chunked plan of a cooperative plan's transfer, for when the window or the pool
// cannot give it all its staging at once: chunked waits for staging as it goes.
func (p plan) fallback() plan {
	return plan{mode: chunked, n: p.n, chunk: p.alt.chunk, chunks: p.alt.chunks, lanes: p.alt.lanes,
		buffer: p.buffer, streamOut: p.streamOut, depth: p.alt.depth}
}

// planStaging plans a staged transfer of n > 0 bytes in direction dir, when active transfers stage
// that way at once (this one among them) and the direction's lanes are asleep or not. Options.Lanes
// are shared among the active transfers, two at least (each caller is a lane; more only contend).
// The transfer runs cooperatively when it has two lanes and its staging fits its share of the
// window (tuning.coopShare), else chunked, in chunks cut finer when that gives every lane one.
func planStaging(n int, dir Direction, active int, asleep bool, o Options, t tuning) plan {
	lanes := max(o.Lanes, 1)
	if active > 1 {
		lanes = min(lanes, max(2, ceilDiv(lanes, active)))
	}
	buf := o.ChunkSize
	streamOut := dir == DeviceToHost && active == 1
	k := cut{chunk: chunkFor(n, buf, lanes, t.minChunk)}
	k.chunks = ceilDiv(n, k.chunk)
	k.lanes = min(lanes, k.chunks)
	k.depth = max(2, ceilDiv(o.Slots(), k.lanes))
	if share := t.coopShare[dir]; lanes >= 2 && share > 0 {
		chunk := min(buf, t.coopChunk)
		per := buf / chunk
		chunks := ceilDiv(n, chunk)
		buffers := ceilDiv(chunks, per)
		if buffers <= o.Slots()/share {
			stripe := roundUp(max(t.minStripe, ceilDiv(chunk, lanes)), 4096)
			perChunk := ceilDiv(chunk, stripe)
			last := n - (chunks-1)*chunk
			stripes := (chunks-1)*perChunk + ceilDiv(last, stripe)
			if cold := t.coldLanes[dir]; asleep && cold > 0 {
				lanes = min(lanes, max(2, cold))
			}
			return plan{
				mode: cooperative, n: n, chunk: chunk, chunks: chunks, lanes: min(lanes, stripes), buffer: buf,
				streamOut: streamOut, backToBack: dir == DeviceToHost && !asleep,
				handoff:   dir == DeviceToHost && !asleep && streamOut && t.handoff,
				perBuffer: per, buffers: buffers, stripe: stripe, stripes: stripes,
				alt: k,
			}
		}
	}
	return plan{mode: chunked, n: n, chunk: k.chunk, chunks: k.chunks, lanes: k.lanes, buffer: buf,
		streamOut: streamOut, depth: k.depth}
}

// chunkFor is the chunk size of a chunked transfer of n bytes: chunk, or less when that would leave
// lanes without work; never below minChunk (or chunk, if smaller), in whole cache lines.
func chunkFor(n, chunk, lanes, minChunk int) int {
	u := roundUp(ceilDiv(n, lanes), 64)
	return max(min(u, chunk), min(minChunk, chunk))
}

// stripeRange is the byte range [lo, hi) of the transfer that stripe i of a cooperative plan
// covers, and the chunk it belongs to; lo == hi for a stripe past the end of a short last chunk.
func (p *plan) stripeRange(i int) (chunk, lo, hi int) {
	perChunk := ceilDiv(p.chunk, p.stripe)
	chunk = i / perChunk
	lo = chunk*p.chunk + (i%perChunk)*p.stripe
	hi = min(lo+p.stripe, (chunk+1)*p.chunk, p.n)
	return chunk, min(lo, hi), hi
}

// chunkRange is the byte range [lo, hi) of the transfer that chunk i covers.
func (p *plan) chunkRange(i int) (lo, hi int) {
	lo = i * p.chunk
	return lo, min(lo+p.chunk, p.n)
}

// stripesOf is the number of stripes of chunk i of a cooperative plan.
func (p *plan) stripesOf(i int) int {
	lo, hi := p.chunkRange(i)
	return ceilDiv(hi-lo, p.stripe)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
func roundUp(a, m int) int { return ceilDiv(a, m) * m }

// tuning holds the staging plan's measured constants: not options, since a user has no way to know
// better values. Benchmarks build copiers with other values (gpu.tunedCopier) to compare them with
// the defaults in the same run.
type tuning struct {
	// coopChunk is a cooperative transfer's chunk: small, so that the first DMA starts early and the
	// last ends soon after the last CPU copy; several share one staging buffer.
	coopChunk int
	// coopShare is the share of the window a cooperative transfer may hold, per direction, as a
	// divisor (zero: never cooperative). The cooperative mode stayed faster than the chunked one up
	// to the whole window uploading, half of it downloading (BenchmarkStagedSizes).
	coopShare [2]int
	// minStripe is the smallest part of a cooperative chunk that one lane copies: below it,
	// claiming the work costs more than sharing it saves.
	minStripe int
	// minChunk is the smallest chunked-mode chunk when a transfer is cut finer to give lanes work.
	minChunk int
	// coldLanes caps the lanes of a cooperative transfer that finds the lanes asleep, per direction
	// (zero: all): lanes that wake late find the work done but pay their wake-up. A few lanes moved
	// a paced stream's frames as fast for less CPU time (BenchmarkPacedFrames, copier=cold-2 to
	// cold-6 and cold-all beside copier=default, frame by frame in one stream); a download took one
	// lane more than an upload to be as fast.
	coldLanes [2]int
	// handoff turns plan.handoff on.
	handoff bool
	// pageableFor is how long the driver's answer that memory is pageable is taken as good
	// (pageableSeen); zero: the driver is asked for every transfer.
	pageableFor time.Duration
}

// defaultTuning is the tuning of every copier made by New.
func defaultTuning() tuning {
	return tuning{
		coopChunk: 1 << 20,
		coopShare: [2]int{HostToDevice: 1, DeviceToHost: 2},
		minStripe: 64 << 10, minChunk: 256 << 10, coldLanes: [2]int{HostToDevice: 3, DeviceToHost: 4}, handoff: true,
		pageableFor: time.Second,
	}
}
