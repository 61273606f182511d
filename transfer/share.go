package transfer

import "sync/atomic"

// Device to host, a chunked transfer ends with the copy-out of the chunks
// that land last, while the lanes whose chunks landed earlier have nothing
// left to do: one lane copying out a whole chunk alone would keep the
// transfer waiting for it long after the last DMA. So once every chunk is
// claimed, a lane whose chunk lands shares its copy-out (outShare) in
// stripes, and the lanes that have finished their own chunks help with
// them until the transfer's last chunk is copied out.

// outShare is the copy-out of one landed chunk, in stripes that any lane
// may claim.
type outShare struct {
	dst, src []byte
	stripe   int
	stripes  int64
	next     atomic.Int64 // stripes claimed
	done     atomic.Int64 // stripes copied
	stream   bool         // copyOut's streaming stores
}

// work copies stripes of s until none is left to claim, and returns how
// many it copied.
func (s *outShare) work() (copied uint64) {
	for {
		i := s.next.Add(1) - 1
		if i >= s.stripes {
			return copied
		}
		lo := int(i) * s.stripe
		hi := min(lo+s.stripe, len(s.dst))
		copyOut(s.dst[lo:hi], s.src[lo:hi], s.stream)
		s.done.Add(1)
		copied++
	}
}

// shareCopyOut copies src out to dst with the help of the lanes that have
// finished, and returns once every byte is copied: the caller then owns
// src again.
func (r *chunkedRun) shareCopyOut(dst, src []byte) {
	// The smallest stripe worth claiming: the lanes that help come and go,
	// and finer stripes share the work more evenly than one per lane
	// (BenchmarkStagedSizes, downloads).
	stripe := roundUp(max(r.c.tune.minStripe, 1), 4096)
	s := &outShare{dst: dst, src: src, stripe: stripe, stripes: int64(ceilDiv(len(src), stripe)), stream: r.p.streamOut}
	r.shareMu.Lock()
	r.shares = append(r.shares, s)
	r.shareMu.Unlock()
	r.nShares.Add(1)
	s.work()
	// The helpers' last stripes: each is a short copy already under way.
	spinUntil(func() bool { return s.done.Load() == s.stripes }, -1)
	r.nShares.Add(-1)
	r.shareMu.Lock()
	for i, t := range r.shares {
		if t == s {
			r.shares = append(r.shares[:i], r.shares[i+1:]...)
			break
		}
	}
	r.shareMu.Unlock()
}

// openShare returns a shared copy-out with stripes left to claim, or nil.
func (r *chunkedRun) openShare() *outShare {
	if r.nShares.Load() == 0 {
		return nil
	}
	r.shareMu.Lock()
	defer r.shareMu.Unlock()
	for _, s := range r.shares {
		if s.next.Load() < s.stripes {
			return s
		}
	}
	return nil
}

// help copies out stripes of the other lanes' landed chunks until every
// chunk of the transfer is copied out or the transfer stops. A lane calls
// it once it has nothing of its own left, so it spins only while the last
// chunks, all claimed, land (BenchmarkStagedTrace).
func (r *chunkedRun) help() {
	for {
		var s *outShare
		spinUntil(func() bool {
			if r.stop.Load() || r.completed.Load() >= int64(r.p.chunks) {
				return true
			}
			s = r.openShare()
			return s != nil
		}, -1)
		if s == nil {
			return
		}
		r.c.stats.helped.Add(s.work())
	}
}
