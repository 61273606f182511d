package pinpool

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/pinpool/pinpool/internal/sizeclass"
	"golang.org/x/sys/unix"
)

// withPageSize makes New see a system page size of page bytes for the
// rest of the test, as on an arm64 kernel with 16 or 64 KiB pages.
func withPageSize(t *testing.T, page int64) {
	old := systemPage
	systemPage = page
	t.Cleanup(func() { systemPage = old })
}

// pageBackend hands out memory aligned to a page larger than this
// machine's, and records the sizes asked: a kernel with that page size
// locks whole pages, so a size that is not a multiple is memory the pool
// does not count.
type pageBackend struct {
	page  int
	mu    sync.Mutex
	sizes []int
	live  int
}

type pageAlloc struct {
	b    *pageBackend
	m    []byte // the mapping
	used []byte // the aligned part handed out
}

func (b *pageBackend) Name() string { return fmt.Sprintf("pages(%d)", b.page) }

func (b *pageBackend) Alloc(size int) (Allocation, error) {
	m, err := unix.Mmap(-1, 0, size+b.page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, err
	}
	off := (b.page - int(uintptr(unsafe.Pointer(&m[0]))%uintptr(b.page))) % b.page
	b.mu.Lock()
	b.sizes = append(b.sizes, size)
	b.live += size
	b.mu.Unlock()
	return &pageAlloc{b: b, m: m, used: m[off : off+size : off+size]}, nil
}

func (a *pageAlloc) Bytes() []byte                   { return a.used }
func (a *pageAlloc) DevicePointer() (uintptr, error) { return 0, ErrNotMapped }
func (a *pageAlloc) Free() error {
	a.b.mu.Lock()
	a.b.live -= len(a.used)
	a.b.mu.Unlock()
	return unix.Munmap(a.m)
}

// TestLargePages: where pages are 16 or 64 KiB, every buffer is a whole
// number of pages and starts on a page, and every allocation the pool asks
// of its backend is whole pages, so that the bytes the pool counts (against
// its budget and RLIMIT_MEMLOCK) are the bytes the kernel locks. Before,
// classes were multiples of 4 KiB whatever the page size: a slab of 12 KiB
// buffers asked for 4,190,208 bytes, and a 64 KiB-page kernel locked up to
// 60 KiB more than the pool counted.
func TestLargePages(t *testing.T) {
	for _, page := range []int{16 << 10, 64 << 10} {
		for _, exact := range []bool{false, true} {
			t.Run(fmt.Sprintf("page=%dK/exact=%v", page>>10, exact), func(t *testing.T) {
				withPageSize(t, int64(page))
				be := &pageBackend{page: page}
				p, err := New(Options{Backend: be, MinAvailable: -1, Exact: exact})
				if err != nil {
					t.Fatal(err)
				}
				var bufs []Buffer
				for _, n := range []int{1, 4096, 4097, 12 << 10, 40 << 10, page - 1, page, page + 1, 200 << 10, 3<<20 + 5} {
					b, err := p.TryGet(n)
					if err != nil {
						t.Fatalf("TryGet(%d): %v", n, err)
					}
					if b.Len() != n || b.Cap() < n || b.Cap()%page != 0 {
						t.Errorf("TryGet(%d): Len %d Cap %d, want a whole number of %d-byte pages", n, b.Len(), b.Cap(), page)
					}
					if a := uintptr(b.Pointer()); a%uintptr(page) != 0 {
						t.Errorf("TryGet(%d): buffer at %#x, not on a %d-byte page", n, a, page)
					}
					bufs = append(bufs, b)
				}
				st := p.Stats()
				be.mu.Lock()
				for _, sz := range be.sizes {
					if sz%page != 0 {
						t.Errorf("the pool asked its backend for %d bytes: not whole %d-byte pages", sz, page)
					}
				}
				if int64(be.live) != st.BytesHeld {
					t.Errorf("the backend holds %d bytes, the pool counts %d", be.live, st.BytesHeld)
				}
				be.mu.Unlock()
				for _, b := range bufs {
					b.Release()
				}
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestLargePageClasses: rounding a class up to a page multiple gives a
// class size, for every class and page size; the pool serves such a class
// with the larger one.
func TestLargePageClasses(t *testing.T) {
	for page := int64(8 << 10); page <= 2<<20; page *= 2 {
		for i := range sizeclass.Count() {
			want := roundUp(sizeclass.Size(i), page)
			j, err := sizeclass.Index(want)
			if err != nil {
				t.Fatalf("page %d, class %d (%d bytes): %v", page, i, sizeclass.Size(i), err)
			}
			if got := sizeclass.Size(j); got != want {
				t.Fatalf("page %d: class %d (%d bytes) rounds to %d, which is no class (next: %d)", page, i, sizeclass.Size(i), want, got)
			}
		}
	}
}
