package transfer

// cachedStep is the largest single memmove of a cached copy. The Go
// runtime's memmove on amd64 switches to non-temporal stores (which bypass
// the caches) at 1 MiB; steps below that keep the destination in the
// last-level cache.
const cachedStep = 512 << 10

// copyBytes copies src into dst (of equal length). cached keeps the
// destination in the CPU caches, in steps below the runtime's threshold
// for non-temporal stores; otherwise it is the runtime's copy (cached
// below 1 MiB, streaming to memory from there), which suits a destination
// that is not read soon. The cooperative mode writes its staging with
// streamBytes instead, since the DMA reads memory that sits in the cores'
// caches much slower (BenchmarkFrameStream); the chunked mode uses cached
// copies, whose window stays in the last-level cache.
func copyBytes(dst, src []byte, cached bool) {
	if !cached {
		copy(dst, src)
		return
	}
	for len(src) > cachedStep {
		copy(dst[:cachedStep], src[:cachedStep])
		dst, src = dst[cachedStep:], src[cachedStep:]
	}
	copy(dst, src)
}
