package transfer

import (
	"runtime"
	"unsafe"
)

// ntCopy64 copies n bytes (a multiple of 64) from src to dst (16-byte aligned) with non-temporal
// stores. Implemented in ntcopy_amd64.s, as are flushLines, demoteLines and cpuid7EBX.
//
//go:noescape
func ntCopy64(dst, src *byte, n uintptr)

// streamBytes copies src into dst (of equal length) with non-temporal stores, which write the
// destination to memory without keeping it in the CPU caches (a plain copy does that only for
// copies of 1 MiB and more).
func streamBytes(dst, src []byte) {
	n := len(src)
	head := int(-uintptr(unsafe.Pointer(unsafe.SliceData(dst))) & 15)
	if head >= n || n-head < 64 {
		copy(dst, src)
		return
	}
	copy(dst[:head], src[:head])
	body := (n - head) &^ 63
	ntCopy64(&dst[head], &src[head], uintptr(body))
	copy(dst[head+body:], src[head+body:])
}

// flushLines evicts n bytes at p (64-byte aligned, n a multiple of 64) from the CPU caches with
// CLFLUSHOPT; demoteLines moves them from the core's own caches to the last-level cache with
// CLDEMOTE, a hint that CPUs without it execute as a no-op. p is an address, not a pointer: the
// lines around a slice may begin before it (onLines keeps the slice alive).
func flushLines(p, n uintptr)
func demoteLines(p, n uintptr)
func cpuid7EBX() uint32 // EBX of CPUID leaf 7, subleaf 0

// canEvict reports whether the CPU has CLFLUSHOPT (CPUID.7.0:EBX bit 23).
var canEvict = cpuid7EBX()&(1<<23) != 0

// evictBytes evicts the cache lines of b from every CPU cache, so that a DMA engine that writes b
// next does not have to invalidate copies of them in the cores' caches, which slows it several
// times over. The cooperative mode evicts its stripes after the copy out when its lanes are awake
// (plan.backToBack); the chunked mode does not, since there it cost more than it saved
// (BenchmarkStagedSizes). It does nothing where CLFLUSHOPT is missing.
func evictBytes(b []byte) {
	if canEvict {
		onLines(b, flushLines)
	}
}

// demoteBytes moves the cache lines of b from the calling core's caches to the last-level cache,
// where a DMA engine reads them without first asking the core for them.
func demoteBytes(b []byte) { onLines(b, demoteLines) }

// onLines runs f over the whole 64-byte cache lines that b touches: the bytes beyond b in its first
// and last line stay valid (an eviction writes a dirty line back first).
func onLines(b []byte, f func(p, n uintptr)) {
	if len(b) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := start &^ 63
	f(lo, (start+uintptr(len(b))+63)&^63-lo)
	runtime.KeepAlive(b)
}
