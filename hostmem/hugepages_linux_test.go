package hostmem

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"unsafe"
)

func TestHugeTLBFrom(t *testing.T) {
	const mi = "MemTotal: 100 kB\nHugePages_Total:     512\nHugePages_Free:      %s\nHugepagesize:       2048 kB\n"
	for _, tc := range []struct {
		meminfo string
		size    int
		want    int
	}{
		{strings.Replace(mi, "%s", "512", 1), 1 << 30, 2 << 20},
		{strings.Replace(mi, "%s", "512", 1), 1<<30 + 1, 0}, // needs 513 pages
		{strings.Replace(mi, "%s", "0", 1), 2 << 20, 0},
		{strings.Replace(mi, "%s", "x", 1), 2 << 20, 0},
		{"MemTotal: 100 kB\n", 2 << 20, 0},
		{"HugePages_Free: 4\nHugepagesize: 1048576 kB\n", 3 << 30, 1 << 30},
		{"HugePages_Free: 4\nHugepagesize: 3000 kB\n", 4096, 0}, // not a power of two
	} {
		if got := hugeTLBFrom([]byte(tc.meminfo), tc.size); got != tc.want {
			t.Errorf("hugeTLBFrom(%q, %d) = %d, want %d", tc.meminfo, tc.size, got, tc.want)
		}
	}
}

func TestAnonHugeIn(t *testing.T) {
	const smaps = `00400000-00500000 r-xp 00000000 08:01 1 /bin/x
Size:               1024 kB
AnonHugePages:      2048 kB
7f0000000000-7f0040000000 rw-p 00000000 00:00 0
Size:            1048576 kB
AnonHugePages:    524288 kB
7f0040000000-7f0080000000 rw-p 00000000 00:00 0
AnonHugePages:   1048576 kB
7f0080000000-7f0090000000 rw-p 00000000 00:00 0
AnonHugePages:      9999 kB
`
	for _, tc := range []struct {
		lo, hi uintptr
		want   int64
	}{
		{0x7f0000000000, 0x7f0040000000, 512 << 20},                                    // one mapping
		{0x7f0000000000, 0x7f0080000000, 1536 << 20},                                   // two
		{0x7f0020000000, 0x7f0040000000, 256 << 20},                                    // half of a merged mapping: its share
		{0x7f0040000000, 0x7f0060000000, 512 << 20},                                    // half of the next
		{0x100000000000, 0x100000100000, 0},                                            // none
		{0x7f0000000000 - 4096, 0x7f0000000000 + 4096, (512 << 20) / (1 << 30 / 4096)}, // one page of it
	} {
		got, err := anonHugeIn(bufio.NewReader(strings.NewReader(smaps)), tc.lo, tc.hi)
		if err != nil || got != tc.want {
			t.Errorf("anonHugeIn(%#x, %#x) = %d, %v; want %d", tc.lo, tc.hi, got, err, tc.want)
		}
	}
}

// TestHugePageBytes maps a region advised to use huge pages and one that is
// not, prefaulted, and checks what they report.
func TestHugePageBytes(t *testing.T) {
	for _, huge := range []bool{false, true} {
		r, err := Map(8<<20, Options{HugePages: huge})
		if err != nil {
			t.Fatal(err)
		}
		n, err := r.HugePageBytes()
		if err != nil || n < 0 || n > int64(r.Cap()) || !huge && n != 0 || r.HugeTLB() && n != int64(r.Cap()) {
			t.Errorf("HugePages %v: HugePageBytes = %d, %v of a %d-byte region", huge, n, err, r.Cap())
		}
		r.Unmap()
		if _, err := r.HugePageBytes(); err != ErrUnmapped {
			t.Errorf("after Unmap: %v, want ErrUnmapped", err)
		}
	}
}

// TestHugeByScan checks the page-table scan against smaps on a region
// advised to use huge pages with only its first half touched, on its
// whole range and on each half, and on a region of normal pages.
func TestHugeByScan(t *testing.T) {
	const n = 64 << 20
	r, err := MapLazy(n, Options{HugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unmap()
	if r.HugeTLB() {
		t.Skip("the region is in the hugetlb pool; the scan counts transparent huge pages")
	}
	mem := r.Bytes()
	for i := 0; i < n/2; i += 4096 {
		mem[i] = 1
	}
	base := uintptr(unsafe.Pointer(&mem[0]))
	whole, ok := hugeByScan(base, n)
	if !ok {
		t.Skip("no PAGEMAP_SCAN on this kernel (Linux 6.7 and later have it)")
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	smaps, err := anonHugeIn(bufio.NewReader(f), base, base+n)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := hugeByScan(base, n/2)
	second, _ := hugeByScan(base+n/2, n/2)
	const huge = 2 << 20
	t.Logf("the scan: %d huge bytes of the touched %d (smaps %d)", whole, n/2, smaps)
	switch {
	case whole != smaps:
		t.Errorf("the scan counts %d huge bytes, smaps %d", whole, smaps)
	case first+second != whole || second != 0 || first%huge != 0:
		t.Errorf("halves %d + %d, whole %d: want the touched first half's huge pages only", first, second, whole)
	}
	got, err := r.HugePageBytes()
	if err != nil || got != whole {
		t.Errorf("HugePageBytes = %d, %v; the scan %d", got, err, whole)
	}
	small, err := MapLazy(8<<20, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Unmap()
	sm := small.Bytes()
	for i := 0; i < len(sm); i += 4096 {
		sm[i] = 1
	}
	if n, ok := hugeByScan(uintptr(unsafe.Pointer(&sm[0])), len(sm)); !ok || n < 0 || n > int64(len(sm)) {
		t.Errorf("a region of normal pages: %d, %v", n, ok)
	}
}

// BenchmarkHugePageBytes measures what a region's huge-page count costs in
// a process that has other large regions (as a pool that grew an arena
// in many allocations has): the page-table scan, which walks the region
// only, against reading smaps, which walks every mapping.
func BenchmarkHugePageBytes(b *testing.B) {
	const n, other = 64 << 20, 2 << 30
	r, err := MapLazy(n, Options{HugePages: true})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Unmap()
	big, err := MapLazy(other, Options{HugePages: true})
	if err != nil {
		b.Fatal(err)
	}
	defer big.Unmap()
	for _, m := range [][]byte{r.Bytes(), big.Bytes()} {
		for i := 0; i < len(m); i += 4096 {
			m[i] = 1
		}
	}
	base := uintptr(unsafe.Pointer(&r.Bytes()[0]))
	b.Run("scan", func(b *testing.B) {
		if _, ok := hugeByScan(base, n); !ok {
			b.Skip("no PAGEMAP_SCAN on this kernel")
		}
		for b.Loop() {
			hugeByScan(base, n)
		}
	})
	b.Run("smaps", func(b *testing.B) {
		for b.Loop() {
			f, err := os.Open("/proc/self/smaps")
			if err != nil {
				b.Fatal(err)
			}
			anonHugeIn(bufio.NewReader(f), base, base+n)
			f.Close()
		}
	})
}
