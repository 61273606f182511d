package testkernels

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"
)

// naiveWord is the kernel's hash written out once more, independently.
func naiveWord(seed uint32, w uint64) uint32 {
	var x uint32 = uint32(w&0xFFFFFFFF)*2654435761 + seed
	x = x ^ (x >> 16)
	x = x * 2246822507
	x = x ^ (x >> 13)
	x = x * 3266489909
	x = x ^ (x >> 16)
	return x
}

func naiveFill(n int, seed uint32) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(naiveWord(seed, uint64(j)>>2) >> (8 * (uint(j) & 3)))
	}
	return b
}

func naiveChecksum(b []byte) uint64 {
	var sum uint64
	for j, c := range b {
		mix := (uint64(j) * 0x9E3779B97F4A7C15) | 1
		sum += (uint64(c) + 1) * mix
	}
	return sum
}

func naiveReadSum(b []byte) uint64 {
	var sum uint64
	nvec := len(b) / 16
	for i := 0; i < 4*nvec; i++ {
		sum += uint64(binary.LittleEndian.Uint32(b[4*i:]))
	}
	for _, c := range b[16*nvec:] {
		sum += uint64(c)
	}
	return sum
}

var testSizes = []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 4096, 1<<20 + 13}

func TestPatternWordKnownValues(t *testing.T) {
	// Worked by hand from the definition: w=0, seed=0 gives x=0 throughout.
	if got := PatternWord(0, 0); got != 0 {
		t.Errorf("PatternWord(0,0) = %#x, want 0", got)
	}
	// Values computed independently (Python, arbitrary-precision integers
	// masked to 32 bits).
	for _, c := range []struct {
		seed uint32
		w    uint64
		want uint32
	}{
		{0, 1, 0x11fd02eb},
		{0x12345678, 3, 0x89e9384f},
		{0xffffffff, 1<<32 | 9, 0x1dc3f63e},
	} {
		if got := PatternWord(c.seed, c.w); got != c.want {
			t.Errorf("PatternWord(%#x, %#x) = %#x, want %#x", c.seed, c.w, got, c.want)
		}
	}
	// Only the low 32 bits of w count.
	if PatternWord(7, 5) != PatternWord(7, 5+1<<32) {
		t.Error("PatternWord uses more than the low 32 bits of w")
	}
	for _, seed := range []uint32{0, 1, 0xDEADBEEF, ^uint32(0)} {
		for _, w := range []uint64{0, 1, 2, 1 << 31, 1<<32 - 1, 1 << 32, 1<<40 + 3} {
			if got, want := PatternWord(seed, w), naiveWord(seed, w); got != want {
				t.Errorf("PatternWord(%#x, %#x) = %#x, want %#x", seed, w, got, want)
			}
		}
	}
}

func TestFillPatternMatchesNaive(t *testing.T) {
	for _, seed := range []uint32{0, 1, 0x12345678, ^uint32(0)} {
		for _, n := range testSizes {
			got := make([]byte, n)
			for i := range got {
				got[i] = 0xAA
			}
			FillPattern(got, seed)
			if want := naiveFill(n, seed); !bytes.Equal(got, want) {
				t.Fatalf("FillPattern(n=%d, seed=%#x) differs from the naive fill", n, seed)
			}
		}
	}
}

func TestFillPatternPrefix(t *testing.T) {
	// A shorter buffer gets a prefix of a longer one's pattern.
	long := make([]byte, 100)
	FillPattern(long, 42)
	for n := 0; n <= len(long); n++ {
		short := make([]byte, n)
		FillPattern(short, 42)
		if !bytes.Equal(short, long[:n]) {
			t.Fatalf("FillPattern of %d bytes is not a prefix of the 100-byte pattern", n)
		}
	}
}

func TestFillPatternSeedsDiffer(t *testing.T) {
	a := make([]byte, 64)
	b := make([]byte, 64)
	FillPattern(a, 1)
	FillPattern(b, 2)
	if bytes.Equal(a, b) {
		t.Error("seeds 1 and 2 give the same pattern")
	}
}

func TestChecksumTable(t *testing.T) {
	for _, n := range testSizes {
		b := naiveFill(n, uint32(n)+7)
		if got, want := Checksum(b), naiveChecksum(b); got != want {
			t.Errorf("Checksum(%d bytes) = %#x, want %#x", n, got, want)
		}
		zero := make([]byte, n)
		if got, want := Checksum(zero), naiveChecksum(zero); got != want {
			t.Errorf("Checksum(%d zero bytes) = %#x, want %#x", n, got, want)
		}
		ff := bytes.Repeat([]byte{0xFF}, n)
		if got, want := Checksum(ff), naiveChecksum(ff); got != want {
			t.Errorf("Checksum(%d 0xFF bytes) = %#x, want %#x", n, got, want)
		}
	}
	if got := Checksum(nil); got != 0 {
		t.Errorf("Checksum(nil) = %#x, want 0", got)
	}
	// Computed independently in Python for bytes 1..19.
	seq := make([]byte, 19)
	for i := range seq {
		seq[i] = byte(i + 1)
	}
	if got := Checksum(seq); got != 0xcd226afdb621fd7d {
		t.Errorf("Checksum(1..19) = %#x, want 0xcd226afdb621fd7d", got)
	}
	// One byte at index 0: (b+1) * (0|1) = b+1.
	if got := Checksum([]byte{41}); got != 42 {
		t.Errorf("Checksum([41]) = %d, want 42", got)
	}
}

func TestChecksumDetectsChanges(t *testing.T) {
	b := naiveFill(300, 99)
	base := Checksum(b)
	for i := range b {
		for _, delta := range []byte{1, 0x80, 0xFF} {
			old := b[i]
			b[i] += delta
			if Checksum(b) == base {
				t.Fatalf("changing byte %d by %#x leaves the checksum unchanged", i, delta)
			}
			b[i] = old
		}
	}
	for i := range b {
		for j := i + 1; j < len(b); j++ {
			if b[i] == b[j] {
				continue
			}
			b[i], b[j] = b[j], b[i]
			if Checksum(b) == base {
				t.Fatalf("swapping bytes %d and %d leaves the checksum unchanged", i, j)
			}
			b[i], b[j] = b[j], b[i]
		}
	}
	if Checksum(b) != base {
		t.Fatal("buffer not restored")
	}
}

func TestChecksumLengthMatters(t *testing.T) {
	// Appending zero bytes still changes the sum: each adds mix(j) != 0.
	b := naiveFill(10, 3)
	if Checksum(b) == Checksum(append(b, 0)) {
		t.Error("appending a zero byte leaves the checksum unchanged")
	}
}

func TestReadSumTable(t *testing.T) {
	for _, n := range testSizes {
		for _, seed := range []uint32{1, 0xCAFEF00D} {
			b := naiveFill(n, seed)
			if got, want := ReadSum(b), naiveReadSum(b); got != want {
				t.Errorf("ReadSum(%d bytes) = %#x, want %#x", n, got, want)
			}
		}
		ff := bytes.Repeat([]byte{0xFF}, n)
		want := uint64(n/16)*4*0xFFFFFFFF + uint64(n%16)*0xFF
		if got := ReadSum(ff); got != want {
			t.Errorf("ReadSum(%d 0xFF bytes) = %#x, want %#x", n, got, want)
		}
	}
	// Fewer than 16 bytes: all tail, summed as bytes.
	if got := ReadSum([]byte{1, 2, 3}); got != 6 {
		t.Errorf("ReadSum([1 2 3]) = %d, want 6", got)
	}
	// 16 bytes: four little-endian words.
	v := make([]byte, 17)
	v[0], v[1], v[4], v[16] = 1, 1, 2, 5
	if got := ReadSum(v); got != 0x101+2+5 {
		t.Errorf("ReadSum(vector+tail) = %#x, want %#x", got, 0x101+2+5)
	}
}

func TestLarge(t *testing.T) {
	n := 64<<20 + 5
	if testing.Short() {
		n = 1<<20 + 5
	}
	b := make([]byte, n)
	FillPattern(b, 0x5EED)
	// Spot-check the fill against the definition.
	r := rand.New(rand.NewPCG(1, 2))
	for k := 0; k < 10000; k++ {
		j := r.IntN(n)
		if want := byte(PatternWord(0x5EED, uint64(j)>>2) >> (8 * (j & 3))); b[j] != want {
			t.Fatalf("byte %d = %#x, want %#x", j, b[j], want)
		}
	}
	if got, want := Checksum(b), naiveChecksum(b); got != want {
		t.Errorf("Checksum(%d bytes) = %#x, want %#x", n, got, want)
	}
	if got, want := ReadSum(b), naiveReadSum(b); got != want {
		t.Errorf("ReadSum(%d bytes) = %#x, want %#x", n, got, want)
	}
}

func TestKernelsPTX(t *testing.T) {
	for _, s := range []string{
		".version 7.0\n",
		".target sm_50\n",
		".address_size 64\n",
		".visible .entry " + KernelFill + "(",
		".visible .entry " + KernelChecksum + "(",
		".visible .entry " + KernelReadSum + "(",
	} {
		if !strings.Contains(kernelsPTX, s) {
			t.Errorf("kernels.ptx lacks %q", s)
		}
	}
	if strings.ContainsRune(kernelsPTX, 0) {
		t.Error("kernels.ptx contains a NUL byte")
	}
	if KernelFill != "pinpool_fill" || KernelChecksum != "pinpool_checksum" || KernelReadSum != "pinpool_read_sum" {
		t.Error("kernel names changed")
	}
}

func FuzzChecksumMatchesNaive(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte("hello, pinned world"))
	f.Add(naiveFill(33, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Checksum(b), naiveChecksum(b); got != want {
			t.Fatalf("Checksum = %#x, naive = %#x (len %d)", got, want, len(b))
		}
	})
}

func FuzzReadSumMatchesNaive(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0xFF})
	f.Add(naiveFill(16, 2))
	f.Add(naiveFill(47, 3))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := ReadSum(b), naiveReadSum(b); got != want {
			t.Fatalf("ReadSum = %#x, naive = %#x (len %d)", got, want, len(b))
		}
	})
}

func FuzzFillPatternMatchesNaive(f *testing.F) {
	f.Add(uint32(0), uint16(0))
	f.Add(uint32(1), uint16(17))
	f.Fuzz(func(t *testing.T, seed uint32, n uint16) {
		got := make([]byte, n)
		FillPattern(got, seed)
		if !bytes.Equal(got, naiveFill(int(n), seed)) {
			t.Fatalf("FillPattern(n=%d, seed=%#x) differs from the naive fill", n, seed)
		}
	})
}

func BenchmarkFillPattern(b *testing.B) {
	buf := make([]byte, 16<<20)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		FillPattern(buf, 1)
	}
}

func BenchmarkChecksum(b *testing.B) {
	buf := make([]byte, 16<<20)
	FillPattern(buf, 1)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		Checksum(buf)
	}
}

func BenchmarkReadSum(b *testing.B) {
	buf := make([]byte, 16<<20)
	FillPattern(buf, 1)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		ReadSum(buf)
	}
}
