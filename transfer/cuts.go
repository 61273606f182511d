package transfer

// cuts is how a staged transfer of n bytes is cut into chunks, numbered in
// address order: optionally head chunks of ramp bytes, then chunks of unit
// bytes (the last one shorter), then optionally tail chunks of ramp bytes
// (the last one shorter when the rest is). Small chunks at the ends start
// the DMA sooner after the first CPU copies, and leave less DMA to wait
// for after the last ones.
type cuts struct {
	n          int
	unit, ramp int
	head, tail int // ramp chunks at each end
	mid        int // unit chunks between them
	midEnd     int // offset where the tail begins
}

// uniformCuts cuts n bytes into chunks of unit bytes.
func uniformCuts(n, unit int) cuts {
	return cuts{n: n, unit: unit, mid: (n + unit - 1) / unit, midEnd: n}
}

// rampCuts cuts n bytes into k chunks of ramp bytes, then chunks of unit
// bytes, then k chunks of ramp bytes, or uniformly in unit chunks when n is
// too small to hold both ramps and a chunk per lane between them.
func rampCuts(n, unit, ramp, k int) cuts {
	if ramp <= 0 || ramp >= unit || n < 2*k*ramp+k*unit {
		return uniformCuts(n, unit)
	}
	c := cuts{n: n, unit: unit, ramp: ramp, head: k, tail: k}
	c.midEnd = n - k*ramp
	mid := c.midEnd - k*ramp
	c.mid = (mid + unit - 1) / unit
	return c
}

// count is the number of chunks.
func (c cuts) count() int { return c.head + c.mid + c.tail }

// at returns the offset and length of chunk i (0 <= i < count).
func (c cuts) at(i int) (off, n int) {
	if i < c.head {
		return i * c.ramp, c.ramp
	}
	i -= c.head
	if i < c.mid {
		off = c.head*c.ramp + i*c.unit
		return off, min(c.unit, c.midEnd-off)
	}
	off = c.midEnd + (i-c.mid)*c.ramp
	return off, min(c.ramp, c.n-off)
}
