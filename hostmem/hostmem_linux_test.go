package hostmem

import (
	"bytes"
	"errors"
	"github.com/pinpool/pinpool/internal/testenv"
	"github.com/pinpool/pinpool/internal/units"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// allocOrSkip is Alloc that skips the test when the lock limit is too small.
func allocOrSkip(t testing.TB, size int, opt Options) *Region {
	t.Helper()
	r, err := Alloc(size, opt)
	if errors.Is(err, ErrLockLimit) {
		t.Skipf("RLIMIT_MEMLOCK too small to lock %d bytes for this test (raise `ulimit -l` or run with CAP_IPC_LOCK): %v", size, err)
	}
	if err != nil {
		t.Fatalf("Alloc(%d): %v", size, err)
	}
	return r
}

func lockedBytes(t testing.TB) uint64 {
	t.Helper()
	n, err := LockedBytes()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// statusKB reads one kB field of /proc/self/status.
func statusKB(t testing.TB, key string) uint64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, found, err := parseStatusKB(f, key)
	if err != nil || !found {
		t.Fatalf("%s: %v, found %v", key, err, found)
	}
	return v
}

// checkMemory writes a pattern over all of b and reads it back.
func checkMemory(t testing.TB, b []byte, seed byte) {
	t.Helper()
	for i := range b {
		b[i] = byte(i*31) + seed
	}
	for i := range b {
		if b[i] != byte(i*31)+seed {
			t.Fatalf("byte %d = %d, want %d", i, b[i], byte(i*31)+seed)
		}
	}
}

// populateVisible is whether a page prefaulted the way Map does it
// (madvise(MADV_POPULATE_WRITE), or a write where the kernel lacks it)
// shows as resident in mincore. Under qemu-user (the arm64 tests on an
// x86-64 host) the madvise succeeds and populates nothing.
var populateVisible = sync.OnceValue(func() bool {
	page := unix.Getpagesize()
	m, err := unix.Mmap(-1, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return false
	}
	defer unix.Munmap(m)
	if unix.Madvise(m, unix.MADV_POPULATE_WRITE) != nil {
		m[0] = 1
	}
	vec := make([]byte, 1)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(page), uintptr(unsafe.Pointer(&vec[0])))
	return errno == 0 && vec[0]&1 != 0
})

// resident reports how many pages of the region are resident (mincore).
// It skips the test where mincore does not tell.
func resident(t testing.TB, r *Region) (res, total int) {
	t.Helper()
	if !populateVisible() {
		t.Skip("madvise(MADV_POPULATE_WRITE) succeeds here but leaves the page out of memory (an emulator such as qemu-user): residency after a prefault cannot be checked")
	}
	page := unix.Getpagesize()
	vec := make([]byte, (r.Cap()+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(r.Pointer()), uintptr(r.Cap()), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	for _, v := range vec {
		if v&1 != 0 {
			res++
		}
	}
	return res, len(vec)
}

func TestSizes(t *testing.T) {
	page := unix.Getpagesize()
	for _, size := range []int{1, 4095, 4096, 4097, 1<<20 + 3} {
		for _, lock := range []bool{false, true} {
			var r *Region
			var err error
			if lock {
				r = allocOrSkip(t, size, Options{})
			} else if r, err = Map(size, Options{}); err != nil {
				t.Fatalf("Map(%d): %v", size, err)
			}
			wantCap := (size + page - 1) / page * page
			b := r.Bytes()
			switch {
			case r.Len() != size || len(b) != size:
				t.Errorf("size %d: Len %d, len(Bytes) %d", size, r.Len(), len(b))
			case r.Cap() != wantCap || cap(b) != wantCap:
				t.Errorf("size %d: Cap %d, cap(Bytes) %d, want %d", size, r.Cap(), cap(b), wantCap)
			case r.Locked() != lock:
				t.Errorf("size %d: Locked() = %v, want %v", size, r.Locked(), lock)
			case r.NUMANode() != -1 || r.HugePages():
				t.Errorf("size %d: NUMANode %d, HugePages %v", size, r.NUMANode(), r.HugePages())
			case uintptr(r.Pointer())%uintptr(page) != 0 || r.Pointer() != unsafe.Pointer(&b[0]):
				t.Errorf("size %d: Pointer %p not page aligned or not &Bytes()[0]", size, r.Pointer())
			}
			if res, total := resident(t, r); res != total {
				t.Errorf("size %d: %d of %d pages resident", size, res, total)
			}
			checkMemory(t, b, byte(size))
			if err := r.Unmap(); err != nil {
				t.Fatalf("Unmap: %v", err)
			}
			if err := r.Unmap(); !errors.Is(err, ErrUnmapped) {
				t.Fatalf("second Unmap = %v, want ErrUnmapped", err)
			}
			if r.Bytes() != nil || r.Pointer() != nil {
				t.Fatalf("Bytes/Pointer not nil after Unmap")
			}
		}
	}
}

func TestInvalidSize(t *testing.T) {
	for _, size := range []int{0, -1, math.MinInt, math.MaxInt, math.MaxInt - 100} {
		if r, err := Map(size, Options{}); !errors.Is(err, ErrInvalidSize) || r != nil {
			t.Errorf("Map(%d) = %v, %v; want ErrInvalidSize", size, r, err)
		}
		if r, err := Alloc(size, Options{}); !errors.Is(err, ErrInvalidSize) || r != nil {
			t.Errorf("Alloc(%d) = %v, %v; want ErrInvalidSize", size, r, err)
		}
	}
	// Large but representable: mmap refuses it; the error is not ErrInvalidSize.
	if r, err := Map(math.MaxInt/2, Options{}); err == nil {
		r.Unmap()
		t.Fatal("Map(MaxInt/2) succeeded")
	} else if !strings.HasPrefix(err.Error(), "hostmem: ") {
		t.Fatalf("error %q lacks the package prefix", err)
	}
}

func TestVmLck(t *testing.T) {
	const size = 16<<20 + 5
	before := lockedBytes(t)
	r := allocOrSkip(t, size, Options{})
	during := lockedBytes(t)
	if during < before+size {
		t.Errorf("VmLck %d after Alloc(%d), was %d", during, size, before)
	}
	if err := r.Unmap(); err != nil {
		t.Fatal(err)
	}
	if after := lockedBytes(t); after != before {
		t.Errorf("VmLck %d after Unmap, want %d", after, before)
	}
}

func TestMapNotLocked(t *testing.T) {
	before := lockedBytes(t)
	r, err := Map(8<<20, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unmap()
	if got := lockedBytes(t); got != before {
		t.Fatalf("VmLck %d after Map, want %d", got, before)
	}
}

func TestConcurrentUnmap(t *testing.T) {
	r, err := Map(1<<20, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { errs[i] = r.Unmap() })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrUnmapped):
			t.Errorf("Unmap: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d Unmap calls succeeded, want 1", ok)
	}
}

func TestHugePages(t *testing.T) {
	const size = 8 << 20
	r, err := Map(size, Options{HugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unmap()
	checkMemory(t, r.Bytes(), 7)
	thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	available := len(thp) > 0 && !strings.Contains(string(thp), "[never]")
	t.Logf("THP %q, accepted %v, huge page size %d", strings.TrimSpace(string(thp)), r.HugePages(), hugePageSize())
	if available && !r.HugePages() {
		t.Errorf("THP is available but madvise(MADV_HUGEPAGE) was not accepted")
	}
	if r.HugePages() && uintptr(r.Pointer())%uintptr(hugePageSize()) != 0 {
		t.Errorf("Pointer %p not aligned to %d", r.Pointer(), hugePageSize())
	}
	if res, total := resident(t, r); res != total {
		t.Errorf("%d of %d pages resident", res, total)
	}
	if kb, ok := anonHugeKB(t, r); ok {
		t.Logf("AnonHugePages of the region: %d kB of %d kB", kb, size>>10)
	}
	// Hugepage regions smaller than one huge page still work.
	small, err := Map(12345, Options{HugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	checkMemory(t, small.Bytes(), 1)
	if err := small.Unmap(); err != nil {
		t.Fatal(err)
	}
}

// anonHugeKB returns AnonHugePages of the mapping that starts at r.Pointer().
func anonHugeKB(t *testing.T, r *Region) (uint64, bool) {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, false
	}
	start := strings.TrimLeft(strings.ToLower(uintptrHex(uintptr(r.Pointer()))), "0") + "-"
	i := strings.Index(string(b), "\n"+start)
	if i < 0 {
		return 0, false
	}
	rest := string(b[i+1:])
	if j := strings.Index(rest, "VmFlags"); j >= 0 {
		rest = rest[:j]
	}
	kb, found, err := parseStatusKB(strings.NewReader(rest), "AnonHugePages")
	return kb, found && err == nil
}

func uintptrHex(p uintptr) string {
	const digits = "0123456789abcdef"
	var buf [16]byte
	for i := len(buf) - 1; i >= 0; i-- {
		buf[i] = digits[p&15]
		p >>= 4
	}
	return string(buf[:])
}

func TestNUMANode0(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/node/node0"); err != nil {
		t.Skip("no /sys/devices/system/node/node0: kernel without NUMA support")
	}
	const size = 4<<20 + 1
	if r, err := Alloc(size, Options{BindNUMA: true, NUMANode: 0}); errors.Is(err, unix.ENOSYS) {
		t.Skipf("mbind is not implemented here (an emulator such as qemu-user): %v", err)
	} else if err == nil {
		r.Unmap()
	}
	r := allocOrSkip(t, size, Options{BindNUMA: true, NUMANode: 0})
	defer r.Unmap()
	if r.NUMANode() != 0 {
		t.Fatalf("NUMANode() = %d, want 0", r.NUMANode())
	}
	checkMemory(t, r.Bytes(), 3)
	// get_mempolicy(MPOL_F_ADDR) reports the policy of the range,
	// MPOL_F_NODE|MPOL_F_ADDR the node of the page.
	const mpolFNode, mpolFAddr = 1, 2
	for _, off := range []int{0, r.Cap() - unix.Getpagesize()} {
		addr := uintptr(r.Pointer()) + uintptr(off)
		var mode int32
		if _, _, errno := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&mode)), 0, 0, addr, mpolFAddr, 0); errno != 0 {
			t.Fatalf("get_mempolicy: %v", errno)
		}
		if mode != unix.MPOL_BIND {
			t.Errorf("policy at offset %d = %d, want MPOL_BIND", off, mode)
		}
		var node int32
		if _, _, errno := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&node)), 0, 0, addr, mpolFNode|mpolFAddr, 0); errno != 0 {
			t.Fatalf("get_mempolicy(node): %v", errno)
		}
		if node != 0 {
			t.Errorf("page at offset %d on node %d, want 0", off, node)
		}
	}
}

func TestNUMABadNode(t *testing.T) {
	const size = 64 << 20
	lckBefore := lockedBytes(t)
	vmBefore := statusKB(t, "VmSize")
	for _, node := range []int{4095, -1, maxNUMANodes, math.MaxInt} {
		for range 20 { // a leak would show as 20 * 64 MiB of VmSize
			for _, ctor := range []func(int, Options) (*Region, error){Map, Alloc} {
				r, err := ctor(size, Options{BindNUMA: true, NUMANode: node})
				if err == nil {
					r.Unmap()
					t.Fatalf("node %d: no error", node)
				}
				if !errors.Is(err, ErrNUMA) {
					t.Fatalf("node %d: error %v does not wrap ErrNUMA", node, err)
				}
			}
		}
	}
	if got := lockedBytes(t); got != lckBefore {
		t.Errorf("VmLck %d, was %d", got, lckBefore)
	}
	if got := statusKB(t, "VmSize"); got > vmBefore+2*(size>>10) {
		t.Errorf("VmSize grew from %d kB to %d kB: a mapping leaked", vmBefore, got)
	}
	_, err := Map(4096, Options{BindNUMA: true, NUMANode: 4095})
	if !errors.Is(err, unix.EINVAL) {
		t.Logf("node 4095: %v (not EINVAL)", err)
	}
}

// withTouch runs f with the MADV_POPULATE_WRITE path disabled, so that
// prefault writes one byte per page.
func withTouch(f func()) {
	old := noPopulate.Load()
	noPopulate.Store(true)
	defer noPopulate.Store(old)
	f()
}

func TestPrefaultEveryPageResident(t *testing.T) {
	page := unix.Getpagesize()
	check := func(t *testing.T) {
		for _, size := range []int{1<<20 + 3*4096, 10<<20 + 1, 33<<20 - 4096} {
			for _, workers := range []int{0, 1, 2, 3, 7, 16, 100} {
				for _, huge := range []bool{false, true} {
					r, err := Map(size, Options{PrefaultWorkers: workers, HugePages: huge})
					if err != nil {
						t.Fatal(err)
					}
					if res, total := resident(t, r); res != total || total != (size+page-1)/page {
						t.Errorf("size %d workers %d huge %v: %d of %d pages resident", size, workers, huge, res, total)
					}
					if err := r.Unmap(); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	t.Run("populate", func(t *testing.T) {
		if noPopulate.Load() {
			t.Skip("kernel lacks MADV_POPULATE_WRITE (Linux 5.14)")
		}
		check(t)
	})
	t.Run("touch", func(t *testing.T) { withTouch(func() { check(t) }) })
}

func TestPrefaultParts(t *testing.T) {
	// The parts cover the slice exactly, whatever the worker count: on a
	// buffer filled with 0xff, the first byte of every page (and no other
	// byte) must be zero afterwards.
	const page = 4096
	for _, n := range []int{1, page, 5*page + 1, 3 << 20, 9<<20 + 7} {
		for _, workers := range []int{-3, 0, 1, 2, 5, 64} {
			buf := bytes.Repeat([]byte{0xff}, n)
			var err error
			withTouch(func() { err = prefault(buf, page, page, workers) })
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				want := byte(0xff)
				if i%page == 0 {
					want = 0
				}
				if buf[i] != want {
					t.Fatalf("n %d workers %d: byte %d = %#x, want %#x", n, workers, i, buf[i], want)
				}
			}
		}
	}
}

func TestConcurrentAllocUnmap(t *testing.T) {
	const goroutines, rounds = 16, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lockLimitErr error
	for g := range goroutines {
		wg.Go(func() {
			for i := range rounds {
				size := 4096*(1+(g*rounds+i)%64) - g // up to 256 KiB, odd sizes
				r, err := Alloc(size, Options{PrefaultWorkers: 1 + i%3})
				if errors.Is(err, ErrLockLimit) {
					mu.Lock()
					lockLimitErr = err
					mu.Unlock()
					return
				}
				if err != nil {
					t.Errorf("Alloc(%d): %v", size, err)
					return
				}
				b := r.Bytes()
				b[0], b[len(b)-1] = byte(g), byte(i)
				if !r.Locked() || b[0] != byte(g) || b[len(b)-1] != byte(i) {
					t.Errorf("region %d/%d broken", g, i)
				}
				if err := r.Unmap(); err != nil {
					t.Errorf("Unmap: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if lockLimitErr != nil {
		t.Skipf("RLIMIT_MEMLOCK too small for 16 concurrent 256 KiB regions: %v", lockLimitErr)
	}
}

func TestLockLimit(t *testing.T) {
	soft, hard, err := LockLimit()
	if err != nil {
		t.Fatal(err)
	}
	if soft > hard {
		t.Fatalf("soft %d > hard %d", soft, hard)
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		t.Fatal(err)
	}
	if soft != rl.Cur || hard != rl.Max {
		t.Fatalf("LockLimit %d/%d, getrlimit %d/%d", soft, hard, rl.Cur, rl.Max)
	}
	t.Logf("RLIMIT_MEMLOCK soft %s hard %s", units.Limit(soft), units.Limit(hard))
}

// TestLockLimitError runs in a child process under an RLIMIT_MEMLOCK of
// 1 MiB without CAP_IPC_LOCK and asks for 64 MiB of locked memory.
func TestLockLimitError(t *testing.T) {
	const limit = 1 << 20
	if !testenv.UnderLimit(t, limit) {
		return
	}
	vmBefore := statusKB(t, "VmSize")
	const size = 64 << 20
	for range 10 {
		r, err := Alloc(size, Options{})
		if err == nil {
			r.Unmap()
			t.Fatalf("Alloc(64 MiB) under a 1 MiB limit succeeded")
		}
		if !errors.Is(err, ErrLockLimit) {
			t.Fatalf("error %v does not wrap ErrLockLimit", err)
		}
		msg := err.Error()
		// The hard limit is 1 MiB too: `ulimit -l unlimited` would fail,
		// so the hint says who can raise it.
		for _, want := range []string{"hostmem: ", "RLIMIT_MEMLOCK is 1 MiB", "64 MiB", "hard limit", "limits.conf", "CAP_IPC_LOCK"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("error %q lacks %q", msg, want)
			}
		}
	}
	if got := lockedBytes(t); got != 0 {
		t.Errorf("VmLck %d after failed Alloc", got)
	}
	// Ten leaked mappings would add 640 MiB; allow for new threads' stacks
	// and, under the race detector, its shadow memory (up to 5 x 64 MiB).
	if got := statusKB(t, "VmSize"); got > vmBefore+5*(size>>10) {
		t.Errorf("VmSize grew from %d kB to %d kB: the mapping leaked", vmBefore, got)
	}
	// Within the limit it still works.
	r, err := Alloc(256<<10, Options{})
	if err != nil {
		t.Fatalf("Alloc(256 KiB) under a 1 MiB limit: %v", err)
	}
	r.Unmap()
	_, err = Alloc(size, Options{})
	t.Logf("ErrLockLimit: %v", err)
}

// TestLockAllowance: with CAP_IPC_LOCK (or no limit) the allowance is
// unlimited; otherwise it is the soft limit less VmLck.
func TestLockAllowance(t *testing.T) {
	n, limited, err := LockAllowance()
	if err != nil {
		t.Fatal(err)
	}
	can, err := CanLockBeyondLimit()
	if err != nil {
		t.Fatal(err)
	}
	soft, _, _ := LockLimit()
	switch {
	case can || soft == math.MaxUint64:
		if limited || n != math.MaxUint64 {
			t.Fatalf("CAP_IPC_LOCK %v, soft %d: allowance %d, limited %v", can, soft, n, limited)
		}
	default:
		if !limited || n > soft {
			t.Fatalf("soft %d: allowance %d, limited %v", soft, n, limited)
		}
	}
	t.Logf("CAP_IPC_LOCK %v, RLIMIT_MEMLOCK soft %s, allowance %d (limited %v)", can, units.Limit(soft), n, limited)
}

// TestLockLimitHint: the hint never tells a user to run a command that
// their hard limit refuses.
func TestLockLimitHint(t *testing.T) {
	for _, tt := range []struct {
		soft, hard uint64
		want, not  string
	}{
		{64 << 10, math.MaxUint64, "`ulimit -l unlimited`", "administrator"},
		{64 << 10, 1 << 30, "`ulimit -l 1048576`", "unlimited"},
		{8 << 20, 8 << 20, "administrator", "ulimit -l"},
	} {
		h := lockLimitHint(tt.soft, tt.hard)
		if !strings.Contains(h, tt.want) || strings.Contains(h, tt.not) || !strings.Contains(h, "CAP_IPC_LOCK") {
			t.Errorf("soft %d hard %d: %q; want %q and CAP_IPC_LOCK, not %q", tt.soft, tt.hard, h, tt.want, tt.not)
		}
	}
}
