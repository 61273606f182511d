package transfer

import (
	"runtime"
	"unsafe"
)

// ntCopy64 copies n bytes (a multiple of 64) from src to dst (16-byte aligned) with non-temporal
// stores. Implemented in ntcopy_amd64.s.
//
//go:noescape
func ntCopy64(dst, src *byte, n uintptr)

// streamBytes copies src into dst (of equal length) with non-temporal stores, which write the
// destination to memory without keeping it in the CPU caches (a plain copy does that only for
// copies of 1 MiB and more).
func streamBytes(dst, src []byte) {
	n := len(src)
	if n == 0 {
		return
	}
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
// CLFLUSHOPT. Implemented in ntcopy_amd64.s.
//
// p is an address, not a pointer: the lines around a slice may begin before it; the caller keeps
// the memory alive.
func flushLines(p, n uintptr)

// cpuid7EBX returns EBX of CPUID leaf 7, subleaf 0.
func cpuid7EBX() uint32

// canEvict reports whether the CPU has CLFLUSHOPT (CPUID.7.0:EBX bit 23).
var canEvict = cpuid7EBX()&(1<<23) != 0

// evictBytes evicts the cache lines of b from every CPU cache, so that a DMA engine that writes b
// next does not have to invalidate copies of them in the cores' caches, which slows it several
// times over. The cooperative mode evicts its stripes after the copy out when its lanes are awake
// (plan.backToBack); the chunked mode does not, since there it cost more than it saved
// (BenchmarkStagedSizes). It does nothing where CLFLUSHOPT is missing.
func evictBytes(b []byte) {
	if !canEvict || len(b) == 0 {
		return
	}
	// The whole lines around b: the bytes beyond b in its first and last line stay valid (an
	// eviction writes a dirty line back first).
	flushLines(lineSpan(b))
	runtime.KeepAlive(b)
}

// lineSpan is the address and length of the whole 64-byte cache lines that b (not empty) touches.
func lineSpan(b []byte) (p, n uintptr) {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := start &^ 63
	hi := (start + uintptr(len(b)) + 63) &^ 63
	return lo, hi - lo
}

// evictAvailable reports whether evictBytes evicts anything.
func evictAvailable() bool { return canEvict }

// demoteLines moves n bytes at p (64-byte aligned, n a multiple of 64) from the core's own caches to
// the last-level cache with CLDEMOTE. Implemented in ntcopy_amd64.s. p is an address, as for
// flushLines.
func demoteLines(p, n uintptr)

// demoteBytes moves the cache lines of b from the calling core's caches to the last-level cache,
// where a DMA engine reads them without first asking the core for them. CLDEMOTE is a hint: CPUs
// without it execute it as a no-op.
func demoteBytes(b []byte) {
	if len(b) == 0 {
		return
	}
	demoteLines(lineSpan(b))
	runtime.KeepAlive(b)
}
