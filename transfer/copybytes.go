package transfer

// cachedStep is the largest single memmove of a cached copy. The Go
// runtime's memmove on amd64 switches to non-temporal stores (which bypass
// the caches) at 1 MiB; steps below that keep the destination in the
// last-level cache.
const cachedStep = 512 << 10

// copyBytes copies src into dst (of equal length). cached keeps the
// destination in the CPU caches, so that a staging buffer the DMA engine
// reads next can be read from the last-level cache rather than from DRAM:
// on the H200 host 16 goroutines copied 79 GB/s into a 16 MiB ring against
// 39 GB/s into fresh memory (BenchmarkHostCopy). In the staged pipeline,
// whose 32 MiB window stays in that host's 300 MiB cache either way, cached
// and streaming stores measured the same within noise
// (BenchmarkStagedTuning, 2026-11-30: 42.8 against 43.8 GB/s at 256 MiB);
// cached is kept as the default for machines with smaller caches, where it
// should matter more, and is still to be measured there. Otherwise large
// copies stream to memory (the runtime's non-temporal stores), which suits
// a destination that is not read soon.
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
