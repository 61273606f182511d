package pinpool

// TrimReason says why the pool gave an allocation back to its backend.
// Stats.TrimsBy counts the frees by reason.
type TrimReason int

// The reasons the pool frees memory.
const (
	// TrimCap: idle memory of one size freed to make room for another
	// under a cap: the Budget, RLIMIT_MEMLOCK or the cgroup's limit.
	TrimCap TrimReason = iota
	// TrimDecay: idle memory above MaxIdle per class not needed for the
	// class's decay time (Options.IdleDecay).
	TrimDecay
	// TrimIdleTimeout: idle memory not needed for Options.IdleTimeout.
	TrimIdleTimeout
	// TrimPressure: idle memory freed because the system's or the
	// cgroup's headroom fell below Options.MinAvailable.
	TrimPressure
	// TrimExplicit: Pool.Trim.
	TrimExplicit
	// TrimClose: Pool.Close, and buffers that came back after it.
	TrimClose
	// TrimFenceError: an allocation freed once the buffers of it whose
	// fence failed were the only ones left.
	TrimFenceError
	// TrimReserveFailed: memory a Reserve grew and no Get took, freed
	// because the Reserve failed or was cancelled.
	TrimReserveFailed

	numTrimReasons
)

var trimReasonNames = [numTrimReasons]string{"cap", "decay", "idle_timeout", "pressure", "explicit", "close", "fence_error", "reserve_failed"}

// String returns the reason's name as metrics label it: "cap", "decay",
// "idle_timeout", "pressure", "explicit", "close", "fence_error" or
// "reserve_failed".
func (r TrimReason) String() string {
	if r < 0 || r >= numTrimReasons {
		return "unknown"
	}
	return trimReasonNames[r]
}

// TrimReasons lists every TrimReason, in order.
func TrimReasons() []TrimReason {
	rs := make([]TrimReason, numTrimReasons)
	for i := range rs {
		rs[i] = TrimReason(i)
	}
	return rs
}

// TrimCounts counts backend frees by reason; the counts add up to
// Stats.Trims.
type TrimCounts [numTrimReasons]uint64

// Of returns the count of one reason (0 for an unknown one).
func (t TrimCounts) Of(r TrimReason) uint64 {
	if r < 0 || r >= numTrimReasons {
		return 0
	}
	return t[r]
}

// Sum returns the count over every reason.
func (t TrimCounts) Sum() uint64 {
	var n uint64
	for _, v := range t {
		n += v
	}
	return n
}
