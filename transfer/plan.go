package transfer

// Step 2 of a transfer: the staging plan. Every staged transfer (pageable
// memory from Options.DirectBelow up, or below it with DirectBelow
// negative) runs by a plan that planStaging decides once, from its size,
// direction, the number of transfers staging at the time, the options and
// the tuning; nothing later changes the mode, the chunk size or the number
// of lanes.

// mode is how the lanes of a staged transfer share its work.
type mode int

const (
	// chunked: each lane claims whole chunks and takes each one through
	// staging, issue and completion on its own, keeping a few in flight.
	// Lanes never wait for each other, which large transfers need.
	chunked mode = iota
	// cooperative: the transfer holds all its staging at once, every lane
	// copies stripes of every chunk, and one goroutine at a time calls the
	// driver. Small transfers spend most of their time in driver calls and
	// in the DMA's first and last chunk, which this shortens; it needs all
	// the staging up front, so only transfers that fit in a share of the
	// window run this way.
	cooperative
)

func (m mode) String() string {
	if m == cooperative {
		return "cooperative"
	}
	return "chunked"
}

// plan is how one staged transfer of n bytes runs.
type plan struct {
	mode   mode
	n      int // bytes of the transfer
	chunk  int // bytes of each chunk (the last may be shorter): one asynchronous copy
	chunks int
	lanes  int // lanes that work on it, the calling goroutine among them
	buffer int // bytes of a staging buffer: Options.ChunkSize, one window slot

	// streamOut: device to host, the bytes leave staging with streaming
	// stores (copyOut), when the transfer stages alone.
	streamOut bool
	// demote: device to host, the cooperative mode demotes staging after
	// the copy out (tuning.demoteOut) instead of evicting it.
	demote bool

	// chunked mode
	depth int // chunks a lane keeps in flight before it completes its oldest
	// edge: host to device, the bytes at the start and at the end of the
	// transfer (one chunk per lane at each end) that are staged with
	// streaming stores (see streamIn); zero for none.
	edge int
	// ramp: the chunks at the start of a transfer host to device, at its
	// end device to host, are smaller than chunk: rampRounds rounds of one
	// chunk per lane, growing from the edge of the transfer inwards, so
	// that the first DMA starts after a small copy in (host to device), and
	// the last copy out after the last DMA is short (device to host). In
	// transfer order, round k's chunks are ramp[k] bytes each and begin at
	// byte rampAt[k]; the full-size chunks begin at bodyAt and end at
	// bodyEnd.
	rampRounds      int
	ramp            [maxRamp]int
	rampAt          [maxRamp]int
	bodyAt, bodyEnd int

	// cooperative mode
	perBuffer int // chunks that share one staging buffer
	buffers   int // staging buffers the transfer holds
	stripe    int // bytes of a chunk that a lane copies at a time
	stripes   int // stripes of the whole transfer
}

// planStaging decides how a staged transfer of n > 0 bytes in direction
// dir runs, when active transfers of the copier stage at once (this one
// among them) and the standing lanes are asleep or not.
//
// Lanes: Options.Lanes, shared among the transfers staging at once (each
// caller is a lane of its own, so more lanes per transfer only make the
// lanes contend), but at least two. Mode: cooperative when the transfer
// has two lanes or more and its staging fits in the direction's share of
// the window (tuning.coopShare); then its chunks are coopChunk bytes
// (ChunkSize if smaller), packed into as few staging buffers as hold them,
// and every lane copies stripes of at least minStripe; host to device,
// when the lanes are asleep, it asks for 1/coldShare of its lanes (two at
// least). Otherwise chunked,
// in chunks of ChunkSize, or smaller ones (down to minChunk) when that is
// what gives every lane a chunk; host to device, its first and last round
// of chunks are staged with streaming stores when tuning.streamEdges says
// so (see streamIn). Device to host, a transfer that stages alone copies
// its bytes out with streaming stores (see copyOut).
func planStaging(n int, dir Direction, active int, asleep bool, o Options, t tuning) plan {
	lanes := max(o.Lanes, 1)
	if active > 1 {
		lanes = min(lanes, max(2, ceilDiv(lanes, active)))
	}
	buf := o.ChunkSize
	streamOut := dir == DeviceToHost && active == 1
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
			if dir == HostToDevice && asleep && t.coldShare > 1 {
				lanes = max(2, ceilDiv(lanes, t.coldShare))
			}
			return plan{
				mode: cooperative, n: n, chunk: chunk, chunks: chunks, lanes: min(lanes, stripes), buffer: buf,
				streamOut: streamOut, demote: dir == DeviceToHost && t.demoteOut, perBuffer: per, buffers: buffers, stripe: stripe, stripes: stripes,
			}
		}
	}
	chunk := chunkFor(n, buf, lanes, t.minChunk)
	chunks := ceilDiv(n, chunk)
	lanes = min(lanes, chunks)
	p := plan{mode: chunked, n: n, chunk: chunk, lanes: lanes}
	p.planRamp(dir, t)
	if p.rampRounds > 0 {
		chunks = p.rampRounds*lanes + ceilDiv(p.bodyEnd-p.bodyAt, chunk)
	}
	edge := 0
	if dir == HostToDevice && t.streamEdges {
		edge = lanes * chunk
	}
	p.chunks, p.buffer, p.streamOut = chunks, buf, streamOut
	p.depth, p.edge = max(2, ceilDiv(o.Slots(), lanes)), edge
	return p
}

// streamIn reports whether the chunk at off of a chunked host-to-device
// plan is staged with streaming stores: the first and the last chunk of
// each lane, which the DMA reads right after the copy, while the lines
// are still in the copying core's cache, where the DMA reads them slower
// than from memory; the chunks between wait in the queue long enough to
// leave the core's cache for the last-level one.
func (p *plan) streamIn(off int) bool {
	return off < p.edge || off >= p.n-p.edge
}

// maxRamp is the most rounds of a chunked plan's ramp.
const maxRamp = 8

// planRamp sets the ramp of chunked plan p by tuning.rampFrom and
// rampGrowth: rounds of chunks of rampFrom bytes at the transfer's edge
// (its start host to device, its end device to host), each round inwards
// rampGrowth percent of the one before (in whole 64 KiB), while they are
// smaller than the plan's chunk and a full round of full-size chunks
// remains.
func (p *plan) planRamp(dir Direction, t tuning) {
	if t.rampFrom <= 0 || t.rampGrowth <= 100 {
		return
	}
	var sizes [maxRamp]int
	rounds, bytes, size := 0, 0, t.rampFrom
	for rounds < maxRamp && size < p.chunk && p.n-(bytes+p.lanes*size) >= p.lanes*p.chunk {
		sizes[rounds] = size
		bytes += p.lanes * size
		rounds++
		size = roundUp(size*t.rampGrowth/100, 64<<10)
	}
	if rounds == 0 {
		return
	}
	p.rampRounds = rounds
	at := 0
	if dir == HostToDevice {
		p.bodyAt, p.bodyEnd = bytes, p.n
	} else {
		p.bodyAt, p.bodyEnd = 0, p.n-bytes
		at = p.bodyEnd
	}
	for k := range rounds {
		size := sizes[k]
		if dir == DeviceToHost {
			size = sizes[rounds-1-k] // shrinking towards the end
		}
		p.ramp[k], p.rampAt[k] = size, at
		at += p.lanes * size
	}
}

// chunkFor is the chunk size of a chunked transfer of n bytes: chunk (the
// staging buffer's size), or less when that would leave lanes without
// work, so that a transfer of a few chunks still copies on every lane;
// never below minChunk (or chunk, if smaller), in whole cache lines.
func chunkFor(n, chunk, lanes, minChunk int) int {
	u := roundUp(ceilDiv(n, lanes), 64)
	return max(min(u, chunk), min(minChunk, chunk))
}

// stripeRange is the byte range [lo, hi) of the transfer that stripe i of
// a cooperative plan covers, and the chunk it belongs to; lo == hi for a
// stripe past the end of a short last chunk.
func (p *plan) stripeRange(i int) (chunk, lo, hi int) {
	perChunk := ceilDiv(p.chunk, p.stripe)
	chunk = i / perChunk
	lo = chunk*p.chunk + (i%perChunk)*p.stripe
	hi = min(lo+p.stripe, (chunk+1)*p.chunk, p.n)
	return chunk, min(lo, hi), hi
}

// chunkRange is the byte range [lo, hi) of the transfer that chunk i
// covers.
func (p *plan) chunkRange(i int) (lo, hi int) {
	if p.rampRounds == 0 {
		lo = i * p.chunk
		return lo, min(lo+p.chunk, p.n)
	}
	ramped := p.rampRounds * p.lanes
	body := p.chunks - ramped
	j := i // the index among the ramp's chunks
	switch {
	case p.bodyAt > 0 && i >= ramped: // after a ramp at the start
		lo = p.bodyAt + (i-ramped)*p.chunk
		return lo, min(lo+p.chunk, p.bodyEnd)
	case p.bodyAt == 0 && i < body: // before a ramp at the end
		lo = i * p.chunk
		return lo, min(lo+p.chunk, p.bodyEnd)
	case p.bodyAt == 0:
		j = i - body
	}
	k := j / p.lanes
	lo = p.rampAt[k] + (j%p.lanes)*p.ramp[k]
	return lo, lo + p.ramp[k]
}

// stripesOf is the number of stripes of chunk i of a cooperative plan.
func (p *plan) stripesOf(i int) int {
	lo, hi := p.chunkRange(i)
	return ceilDiv(hi-lo, p.stripe)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func roundUp(a, m int) int { return ceilDiv(a, m) * m }
