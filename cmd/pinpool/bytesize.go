package main

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// byteSize is a flag value in bytes that accepts units: see parseBytes.
type byteSize int64

// UnmarshalText implements encoding.TextUnmarshaler (used by kong).
func (b *byteSize) UnmarshalText(text []byte) error {
	n, err := parseBytes(string(text))
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// String formats the size as parseBytes reads it back: the exact count of
// bytes, with a binary unit when it is a whole number of one.
func (b byteSize) String() string {
	n := int64(b)
	if n == 0 {
		return "0"
	}
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.mult == 0 {
			return fmt.Sprintf("%d%s", n/u.mult, u.name)
		}
	}
	return fmt.Sprint(n)
}

// byteUnits maps a lower-cased unit to its multiplier. Binary units (KiB,
// and the bare K, M, G, T of dd and ulimit) are powers of 1024; decimal
// units (kB, MB, GB, TB) powers of 1000.
var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// byteSyntax is what a size flag wants.
const byteSyntax = "a byte count such as 3110400, 64KiB, 3MiB, 1.5GiB or 2GB"

// parseBytes parses a byte count: digits with an optional fraction, then
// an optional unit (case-insensitive, optionally after spaces): B; KiB, MiB,
// GiB, TiB or K, M, G, T (powers of 1024); kB, MB, GB, TB (powers of 1000).
// A fraction is allowed with a unit ("1.5GiB") and the result is rounded
// down to whole bytes. Negative values, values above math.MaxInt64 and
// anything else are errors.
func parseBytes(s string) (int64, error) {
	in := s
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	mult, ok := byteUnits[unit]
	intPart, frac, hasDot := strings.Cut(num, ".")
	if !ok || num == "" || strings.Contains(frac, ".") || intPart == "" && frac == "" || hasDot && frac == "" {
		return 0, badValue(in, byteSyntax)
	}
	var n int64
	for _, c := range intPart {
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, badValue(in, "a size below 8 EiB")
		}
		n = n*10 + d
	}
	if n > math.MaxInt64/mult {
		return 0, badValue(in, "a size below 8 EiB")
	}
	n *= mult
	// The fraction: digits / 10^k of mult, exact in integers while it fits
	// (at most 18 digits count; more cannot change a whole byte of a unit
	// below 10^18).
	var fnum, fden int64 = 0, 1
	for _, c := range frac {
		if fden >= 1e18 {
			break
		}
		fnum = fnum*10 + int64(c-'0')
		fden *= 10
	}
	if fnum > 0 {
		if mult == 1 {
			return 0, badValue(in, "whole bytes (a fraction needs a unit, as in 1.5KiB)")
		}
		add := mulDiv(fnum, mult, fden)
		if n > math.MaxInt64-add {
			return 0, badValue(in, "a size below 8 EiB")
		}
		n += add
	}
	return n, nil
}

// mulDiv returns a*b/c rounded down, for 0 <= a < c and b, c > 0, in
// 128-bit arithmetic (a < c keeps the quotient below b, so it fits).
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}
