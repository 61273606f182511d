package transfer

import "unsafe"

// ntCopy64 copies n bytes (a multiple of 64) from src to dst (16-byte
// aligned) with non-temporal stores. Implemented in ntcopy_amd64.s.
//
//go:noescape
func ntCopy64(dst, src *byte, n uintptr)

// hasStreamingStores reports whether streamBytes bypasses the caches.
const hasStreamingStores = true

// streamBytes copies src into dst (of equal length) with non-temporal
// stores, which write the destination to memory without keeping it in the
// CPU caches (a plain copy does that only for copies of 1 MiB and more).
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
