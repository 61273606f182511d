package testkernels

import (
	_ "embed"
	"encoding/binary"
)

// Entry-point names of the kernels in kernels.ptx, for cuModuleGetFunction.
const (
	// KernelFill is pinpool_fill(dst u64, nbytes u64, seed u32): it writes
	// the pattern that FillPattern writes.
	KernelFill = "pinpool_fill"
	// KernelChecksum is pinpool_checksum(src u64, nbytes u64, out u64): it
	// adds Checksum(src[:nbytes]) to the uint64 at out.
	KernelChecksum = "pinpool_checksum"
	// KernelReadSum is pinpool_read_sum(src u64, nbytes u64, out u64): it adds
	// ReadSum(src[:nbytes]) to the uint64 at out; src must be 16-byte aligned.
	KernelReadSum = "pinpool_read_sum"
)

// kernelsPTX is the hand-written PTX module (PTX ISA 7.0, sm_50) that holds
// the three kernels above; pass it, NUL-terminated, to cuModuleLoadData.
//
//go:embed kernels.ptx
var kernelsPTX string

// checksumMul is the odd 64-bit constant (2^64 / golden ratio) of mix(j).
const checksumMul = 0x9E3779B97F4A7C15

// PatternWord returns word w of the fill pattern for seed: a 32-bit hash
// (murmur3's finaliser applied to uint32(w)*0x9E3779B1 + seed) computed with
// wrapping uint32 arithmetic. Only the low 32 bits of w are used.
func PatternWord(seed uint32, w uint64) uint32 {
	x := uint32(w)*0x9E3779B1 + seed
	x ^= x >> 16
	x *= 0x85EBCA6B
	x ^= x >> 13
	x *= 0xC2B2AE35
	x ^= x >> 16
	return x
}

// FillPattern writes into dst exactly the bytes that the pinpool_fill kernel
// writes for a buffer that starts at dst[0]: dst[j] is byte j&3 (little
// endian) of PatternWord(seed, j>>2).
func FillPattern(dst []byte, seed uint32) {
	n := len(dst) &^ 3
	for j := 0; j < n; j += 4 {
		binary.LittleEndian.PutUint32(dst[j:j+4], PatternWord(seed, uint64(j>>2)))
	}
	if n < len(dst) {
		x := PatternWord(seed, uint64(n>>2))
		for j := n; j < len(dst); j++ {
			dst[j] = byte(x)
			x >>= 8
		}
	}
}

// Checksum returns what the pinpool_checksum kernel adds to *out for b: the
// sum over j of (uint64(b[j]) + 1) * mix(j), mod 2^64, where
// mix(j) = (uint64(j) * 0x9E3779B97F4A7C15) | 1. Every byte has its own odd
// weight, so changing any one byte, or swapping two different bytes, changes
// the result.
func Checksum(b []byte) uint64 {
	// sum (b[j]+1)*mix(j) = sum b[j]*mix(j) + sum mix(j). mix(j) is j*K for
	// odd j and j*K+1 for even j (K is odd, so j*K has j's parity), hence
	// sum mix(j) = K*n(n-1)/2 + ceil(n/2).
	n := uint64(len(b))
	var tri uint64 // n(n-1)/2 mod 2^64
	if n&1 == 0 {
		tri = (n / 2) * (n - 1)
	} else {
		tri = n * ((n - 1) / 2)
	}
	sum := checksumMul*tri + (n+1)/2

	// Four interleaved accumulators over 8 bytes at a time.
	var k uint64 = checksumMul // a variable, so that 2*k... wrap mod 2^64
	var s0, s1, s2, s3 uint64
	m := uint64(0) // j*K for the first byte of the chunk
	j := 0
	for ; j+8 <= len(b); j += 8 {
		c := b[j : j+8 : j+8]
		s0 += uint64(c[0])*(m|1) + uint64(c[4])*((m+4*k)|1)
		s1 += uint64(c[1])*((m+k)|1) + uint64(c[5])*((m+5*k)|1)
		s2 += uint64(c[2])*((m+2*k)|1) + uint64(c[6])*((m+6*k)|1)
		s3 += uint64(c[3])*((m+3*k)|1) + uint64(c[7])*((m+7*k)|1)
		m += 8 * k
	}
	for ; j < len(b); j++ {
		s0 += uint64(b[j]) * (m | 1)
		m += k
	}
	return sum + s0 + s1 + s2 + s3
}

// ReadSum returns what the pinpool_read_sum kernel adds to *out for b: the
// sum of the little-endian uint32 words in the first 16*(len(b)/16) bytes
// plus the sum of the remaining len(b)%16 tail bytes, mod 2^64.
func ReadSum(b []byte) uint64 {
	nvec := len(b) &^ 15
	var lo, hi uint64
	for j := 0; j < nvec; j += 8 {
		v := binary.LittleEndian.Uint64(b[j : j+8])
		lo += v & 0xFFFFFFFF
		hi += v >> 32
	}
	sum := lo + hi
	for _, c := range b[nvec:] {
		sum += uint64(c)
	}
	return sum
}
