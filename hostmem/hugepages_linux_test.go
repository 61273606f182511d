package hostmem

import (
	"bufio"
	"os"
	"strings"
	"testing"
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

// TestHugeByPageFlags checks the page-flag count against smaps' on a
// region advised to use huge pages, prefaulted in part (whole huge pages,
// one page of the next, the rest untouched), where the process
// may read page frames; elsewhere it checks that the count says it cannot.
func TestHugeByPageFlags(t *testing.T) {
	r, err := MapLazy(16<<20, Options{HugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unmap()
	h := hugePageSize()
	if err := r.Prefault(0, 5*h+4096); err != nil { // five whole huge pages and one page of the next
		t.Fatal(err)
	}
	got, ok := hugeByPageFlags(uintptr(r.base), r.capacity, h)
	if !ok {
		if got != 0 {
			t.Fatalf("hugeByPageFlags = %d, false; want 0 when it cannot tell", got)
		}
		t.Skip("page frames are hidden from this process (no CAP_SYS_ADMIN): HugePageBytes reads smaps")
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want, err := anonHugeIn(bufio.NewReader(f), uintptr(r.base), uintptr(r.base)+uintptr(r.capacity))
	if err != nil {
		t.Fatal(err)
	}
	if got != want || got > int64(6*h) { // the page touched of the sixth may fault in a whole huge page
		t.Fatalf("hugeByPageFlags = %d, smaps AnonHugePages %d; want them equal and at most the %d of the huge pages touched", got, want, 6*h)
	}
	if n, err := r.HugePageBytes(); err != nil || n != got {
		t.Fatalf("HugePageBytes = %d, %v; want %d", n, err, got)
	}
}

// TestHugeSampled checks the scaled count of a region looked at in part:
// huge pages in its first half only, two of its eight ranges looked at
// (the first of each half), count half of it.
func TestHugeSampled(t *testing.T) {
	h := hugePageSize()
	r, err := MapLazy(8*h, Options{HugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unmap()
	if uintptr(r.base)%uintptr(h) != 0 {
		t.Skip("the region is not aligned to a huge page")
	}
	if err := r.Prefault(0, 4*h); err != nil {
		t.Fatal(err)
	}
	all, ok := hugeSampled(uintptr(r.base), r.capacity, h, 8)
	if !ok {
		t.Skip("page frames are hidden from this process (no CAP_SYS_ADMIN)")
	}
	if all != int64(4*h) {
		t.Skipf("the kernel gave %d bytes of huge pages to the 4 faulted in; want all of them for this test", all)
	}
	if got, _ := hugeSampled(uintptr(r.base), r.capacity, h, 2); got != int64(4*h) {
		t.Fatalf("two of eight ranges looked at: %d bytes, want %d", got, 4*h)
	}
	if got, _ := hugeSampled(uintptr(r.base), r.capacity, h, 3); got < 0 || got > int64(8*h) {
		t.Fatalf("three of eight ranges looked at: %d bytes, out of range", got)
	}
}
