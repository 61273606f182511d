// Package sizeclass holds the size-class arithmetic of the pool: it maps a
// requested byte count to the class whose buffers serve it.
//
// Every class size is a multiple of [PageSize], the minimum allocation unit.
// The classes are:
//
//   - n <= 4 KiB: one class, 4 KiB (one page). The waste is below one page.
//   - 4 KiB < n <= 32 KiB ([LinearMax]): every page multiple is a class
//     (8, 12, ..., 32 KiB). The waste is below one page.
//   - 32 KiB < n <= 1 GiB ([FineMin]): eight classes per power of two
//     ("float-like"): for n in (2^k, 2^(k+1)] the classes are
//     2^k + i*2^(k-3), i = 1..8. As k >= 15, the step 2^(k-3) is a multiple
//     of 4 KiB, so these classes are page aligned without further
//     rounding, and the waste c-n is at most 2^(k-3)-1, which is strictly
//     less than n/8 ([WasteDivisor]).
//   - n > 1 GiB: 128 classes per power of two, 2^k + i*2^(k-7), so that a
//     large buffer wastes less than n/128 ([FineWasteDivisor], under 0.8%:
//     at most 16 MiB of a 2.08 GiB request where eight classes would waste
//     260 MB). The step is at least 8 MiB, a multiple of any huge page.
//
// Why not eight classes per power of two all the way down: below 32 KiB the
// step 2^(k-3) is smaller than a page, so rounding those classes up to a page
// merges them into page multiples anyway, and a page-granular class cannot
// keep the waste under 12.5% for n just above a page (4097 bytes needs 8 KiB).
// The bound therefore reads: c-n < PageSize for every n, and
// WasteDivisor*(c-n) < n for n > LinearMax.
//
// Exact-size allocations (no rounding) are a pool policy and not handled here.
package sizeclass

import (
	"errors"
	"math/bits"
	"strconv"
)

const (
	// PageSize is the allocation unit: every class size is a multiple of it,
	// and the smallest class is exactly one page.
	PageSize = 4096

	// LinearMax is the largest size up to which every page multiple is a
	// class. Above it there are eight classes per power of two.
	LinearMax = 32 << 10

	// WasteDivisor bounds the rounding waste above LinearMax: for
	// LinearMax < n <= Max, WasteDivisor*(Round(n)-n) < n, i.e. less than
	// 12.5% of the request. At or below LinearMax the waste is below PageSize.
	WasteDivisor = 8

	// FineMin is the size above which classes are 128 per power of two.
	FineMin = 1 << 30

	// FineWasteDivisor bounds the rounding waste above FineMin:
	// FineWasteDivisor*(Round(n)-n) < n, less than 0.8% of the request.
	FineWasteDivisor = 128

	// Max is the largest request that has a class (1 TiB); it is itself a
	// class size.
	Max = 1 << 40

	// classesPerOctave is the number of classes per power of two above
	// LinearMax, up to FineMin; fineClassesPerOctave above it.
	classesPerOctave     = 8
	fineClassesPerOctave = 128
	// fineShift is log2(FineMin); fineBase is the index of the first class
	// above it.
	fineShift = 30
	fineBase  = LinearMax/PageSize + classesPerOctave*(fineShift-linearShift)
	// pageShift is log2(PageSize).
	pageShift = 12
	// linearShift is log2(LinearMax).
	linearShift = 15
	// count is the number of classes: LinearMax/PageSize page-multiple
	// classes, then classesPerOctave per power of two from 2^15 to 2^30
	// and fineClassesPerOctave from 2^30 to 2^40.
	count = fineBase + fineClassesPerOctave*(40-fineShift)
)

// ErrInvalidSize is returned for a request that is not in 1..Max.
var ErrInvalidSize = errors.New("sizeclass: size out of range (must be 1 byte .. 1 TiB)")

// Count returns the number of classes; valid indexes are 0..Count()-1.
func Count() int { return count }

// Index returns the class index for a request of n bytes. Indexes are dense,
// start at 0 (the 4 KiB class) and never decrease as n grows. It returns
// ErrInvalidSize when n <= 0 or n > Max. Index runs in constant time and does
// not allocate.
func Index(n int64) (int, error) {
	if n <= 0 || n > Max {
		return 0, ErrInvalidSize
	}
	m := uint64(n - 1)
	// k is such that n is in (2^k, 2^(k+1)]; k = -1 for n = 1.
	k := bits.Len64(m) - 1
	if k < linearShift {
		// One class per page: n in ((j)*4K, (j+1)*4K] has index j.
		return int(m >> pageShift), nil
	}
	if k >= fineShift {
		// (n-1)>>(k-7) is in [128, 256): 128 plus the full steps of
		// 2^(k-7) above 2^k. Octave k starts at fineBase+128*(k-30).
		return fineBase + (k-fineShift)*fineClassesPerOctave + int(m>>(k-7)) - fineClassesPerOctave, nil
	}
	// n-1 is in [2^k, 2^(k+1)), so (n-1)>>(k-3) is in [8, 16): 8 plus the
	// number of full steps of 2^(k-3) above 2^k. Octave k starts at index
	// 8*(k-15)+8.
	return (k-linearShift)*classesPerOctave + int(m>>(k-3)), nil
}

// Size returns the size in bytes of class idx. It panics if idx is not in
// 0..Count()-1, like an out-of-range slice index.
func Size(idx int) int64 {
	if uint(idx) >= count {
		panic("sizeclass: class index " + strconv.Itoa(idx) + " out of range")
	}
	if idx < LinearMax/PageSize {
		return int64(idx+1) << pageShift
	}
	if idx >= fineBase {
		// octave k = 30 + (idx-fineBase)/128: size (129 + i) << (k-7).
		j, i := (idx-fineBase)/fineClassesPerOctave, (idx-fineBase)%fineClassesPerOctave
		return int64(fineClassesPerOctave+i+1) << (fineShift + j - 7)
	}
	// idx in [8*(j+1), 8*(j+2)) is octave k = 15+j: size (9 + idx%8) << (k-3).
	shift := idx/classesPerOctave + linearShift - 4
	return int64(idx%classesPerOctave+classesPerOctave+1) << shift
}

// Round returns the class size that serves a request of n bytes: the
// smallest class size >= n. It returns ErrInvalidSize when n <= 0 or n > Max.
func Round(n int64) (int64, error) {
	idx, err := Index(n)
	if err != nil {
		return 0, err
	}
	return Size(idx), nil
}
