package cudahost

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/pinpool/pinpool/cuda"
)

// journal records the order of fake driver and system calls.
type journal struct {
	mu  sync.Mutex
	log []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	j.log = append(j.log, fmt.Sprintf(format, args...))
	j.mu.Unlock()
}

func (j *journal) String() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.log, " ")
}

// fakePart stands for one registration or host allocation.
type fakePart struct {
	j       *journal
	id      int
	mem     []byte
	dptr    cuda.DevicePtr
	freeErr error
	dptrErr error
}

func (p *fakePart) Len() int { return len(p.mem) }

func (p *fakePart) DevicePointer() (cuda.DevicePtr, error) { return p.dptr, p.dptrErr }

func (p *fakePart) Free() error {
	p.j.add("free%d", p.id)
	return p.freeErr
}

type fakeRegion struct {
	j   *journal
	err error
}

func (r *fakeRegion) Unmap() error {
	r.j.add("unmap")
	return r.err
}

// fakeReg returns a register function that makes fakeParts whose device
// address equals the host address, failing at part failAt (1-based; 0 never).
func fakeReg(j *journal, failAt int) (func([]byte) (part, error), *[]*fakePart) {
	var made []*fakePart
	return func(b []byte) (part, error) {
		id := len(made) + 1
		if id == failAt {
			j.add("fail%d", id)
			return nil, cuda.ErrOutOfMemory
		}
		p := &fakePart{j: j, id: id, mem: b, dptr: cuda.DevicePtr(unsafe.Pointer(unsafe.SliceData(b)))}
		made = append(made, p)
		j.add("reg%d:%d", id, len(b))
		return p, nil
	}, &made
}

// TestRegisteredPartsMap registers page-aligned memory the way
// allocRegister does, with cuda.RegisterInParts (whose split and undo are
// tested in package cuda), and checks that the parts map contiguously.
func TestRegisteredPartsMap(t *testing.T) {
	page := os.Getpagesize()
	raw := make([]byte, 5*page)
	off := int(-uintptr(unsafe.Pointer(&raw[0])) & uintptr(page-1))
	mem := raw[off : off+4*page : off+4*page]
	j := &journal{}
	reg, made := fakeReg(j, 0)
	parts, err := cuda.RegisterInParts(mem, page, reg)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("reg1:%[1]d reg2:%[1]d reg3:%[1]d reg4:%[1]d", page)
	if j.String() != want || len(parts) != len(*made) {
		t.Fatalf("calls %s; want %s", j, want)
	}
	if d, err := devicePointer(parts); err != nil || d != uintptr(unsafe.Pointer(&mem[0])) {
		t.Errorf("devicePointer = %#x, %v", d, err)
	}

	// A failure frees the parts already made, last first.
	j = &journal{}
	reg, _ = fakeReg(j, 3)
	if parts, err := cuda.RegisterInParts(mem, page, reg); parts != nil || !errors.Is(err, cuda.ErrOutOfMemory) {
		t.Fatalf("RegisterInParts = %v, %v; want ErrOutOfMemory", parts, err)
	}
	if want := fmt.Sprintf("reg1:%[1]d reg2:%[1]d fail3 free2 free1", page); j.String() != want {
		t.Fatalf("calls %s; want %s", j, want)
	}
}

func TestDevicePointer(t *testing.T) {
	j := &journal{}
	p1 := &fakePart{j: j, id: 1, mem: make([]byte, 4096), dptr: 0x10000}
	p2 := &fakePart{j: j, id: 2, mem: make([]byte, 8192), dptr: 0x11000}
	p3 := &fakePart{j: j, id: 3, mem: make([]byte, 4096), dptr: 0x13000}
	if d, err := devicePointer([]part{p1, p2, p3}); err != nil || d != 0x10000 {
		t.Fatalf("contiguous: %#x, %v", d, err)
	}
	p3.dptr = 0x90000
	if _, err := devicePointer([]part{p1, p2, p3}); !errors.Is(err, ErrCannotMap) {
		t.Fatalf("non-contiguous: %v; want ErrCannotMap", err)
	}
	p2.dptrErr = cuda.ErrInvalidValue
	if _, err := devicePointer([]part{p1, p2, p3}); !errors.Is(err, cuda.ErrInvalidValue) {
		t.Fatalf("failing part: %v", err)
	}
	if _, err := devicePointer(nil); !errors.Is(err, ErrCannotMap) {
		t.Fatalf("no parts: %v", err)
	}
}

// fakeBackend is a Backend without a driver: its context release is
// recorded in j.
func fakeBackend(j *journal, opt Options) *Backend {
	opt, err := validate(opt, propsH200)
	if err != nil {
		panic(err)
	}
	return newBackend(nil, propsH200, opt, func() error { j.add("release"); return nil })
}

// fakeChunk makes a chunk of n registered parts of 4 KiB, as Alloc would
// with a RegisterChunk of 4096 on 4 KiB pages.
func fakeChunk(t *testing.T, b *Backend, j *journal, n int) *Chunk {
	t.Helper()
	if err := b.acquire(); err != nil {
		t.Fatal(err)
	}
	mem := make([]byte, n*4096)
	reg, _ := fakeReg(j, 0)
	parts := make([]part, n)
	for i := range parts {
		p, err := reg(mem[i*4096 : (i+1)*4096 : (i+1)*4096])
		if err != nil {
			t.Fatal(err)
		}
		parts[i] = p
	}
	c, err := b.finish(mem, parts, &fakeRegion{j: j})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestChunkFree(t *testing.T) {
	j := &journal{}
	b := fakeBackend(j, Options{Method: Register})
	c := fakeChunk(t, b, j, 3)
	if c.Len() != 3*4096 || len(c.Bytes()) != c.Len() || c.Pointer() != unsafe.Pointer(&c.Bytes()[0]) {
		t.Fatalf("Len %d, len(Bytes) %d", c.Len(), len(c.Bytes()))
	}
	if _, err := c.DevicePointer(); !errors.Is(err, cuda.ErrNotMapped) || !strings.HasPrefix(err.Error(), "cudahost: ") {
		t.Fatalf("DevicePointer of unmapped chunk: %v; want cuda.ErrNotMapped", err)
	}
	j.log = nil
	if err := c.Free(); err != nil {
		t.Fatal(err)
	}
	// Unregister every part, then unmap; the context stays (not closed).
	if want := "free1 free2 free3 unmap"; j.String() != want {
		t.Fatalf("Free: %s; want %s", j, want)
	}
	if err := c.Free(); !errors.Is(err, ErrFreed) {
		t.Fatalf("second Free: %v; want ErrFreed", err)
	}
	if c.Bytes() != nil || c.Pointer() != nil {
		t.Fatal("Bytes or Pointer not nil after Free")
	}
	if _, err := c.DevicePointer(); !errors.Is(err, ErrFreed) {
		t.Fatalf("DevicePointer after Free: %v", err)
	}
	if err := b.Close(); err != nil || j.String() != "free1 free2 free3 unmap release" {
		t.Fatalf("Close: %v, calls %s", err, j)
	}
	if err := b.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

// TestCloseWithLiveChunks checks that the context is released only after
// Close and the last Free, in either order.
func TestCloseWithLiveChunks(t *testing.T) {
	j := &journal{}
	b := fakeBackend(j, Options{Method: Register})
	c1 := fakeChunk(t, b, j, 1)
	c2 := fakeChunk(t, b, j, 1)
	j.log = nil
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Alloc(4096); !errors.Is(err, ErrClosed) || !strings.HasPrefix(err.Error(), "cudahost: ") {
		t.Fatalf("Alloc after Close: %v; want ErrClosed", err)
	}
	if err := c1.Free(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(j.String(), "release") {
		t.Fatalf("context released with a chunk still live: %s", j)
	}
	if err := c2.Free(); err != nil {
		t.Fatal(err)
	}
	if want := "free1 unmap free1 unmap release"; j.String() != want {
		t.Fatalf("calls %s; want %s", j, want)
	}
}

func TestChunkFreeErrors(t *testing.T) {
	j := &journal{}
	b := fakeBackend(j, Options{Method: Register})
	c := fakeChunk(t, b, j, 2)
	bad := errors.New("unregister failed")
	c.parts[0].(*fakePart).freeErr = bad
	c.region.(*fakeRegion).err = errors.New("munmap failed")
	j.log = nil
	err := c.Free()
	// Every step runs even after a failure; both failures are reported.
	if !errors.Is(err, bad) || !strings.Contains(err.Error(), "munmap failed") || !strings.HasPrefix(err.Error(), "cudahost: ") {
		t.Fatalf("Free = %v", err)
	}
	if want := "free1 free2 unmap"; j.String() != want {
		t.Fatalf("calls %s; want %s", j, want)
	}
}

func TestMappedChunk(t *testing.T) {
	j := &journal{}
	b := fakeBackend(j, Options{Method: Register, Mapped: true})
	c := fakeChunk(t, b, j, 4)
	d, err := c.DevicePointer()
	if err != nil || d != uintptr(c.Pointer()) {
		t.Fatalf("DevicePointer = %#x, %v; want %p", d, err, c.Pointer())
	}
	if err := c.Free(); err != nil {
		t.Fatal(err)
	}

	// Parts that do not map contiguously: finish fails and frees all.
	if err := b.acquire(); err != nil {
		t.Fatal(err)
	}
	p1 := &fakePart{j: j, id: 1, mem: make([]byte, 4096), dptr: 0x1000}
	p2 := &fakePart{j: j, id: 2, mem: make([]byte, 4096), dptr: 0x9000}
	j.log = nil
	if c, err := b.finish(make([]byte, 8192), []part{p1, p2}, &fakeRegion{j: j}); !errors.Is(err, ErrCannotMap) || c != nil {
		t.Fatalf("finish = %v, %v; want ErrCannotMap", c, err)
	}
	if want := "free1 free2 unmap"; j.String() != want {
		t.Fatalf("calls %s; want %s", j, want)
	}
}

func TestAllocInvalidSize(t *testing.T) {
	j := &journal{}
	b := fakeBackend(j, Options{})
	for _, n := range []int{0, -4096, 1, 4095, 4097, 3110400} {
		if c, err := b.Alloc(n); !errors.Is(err, ErrInvalidSize) || c != nil {
			t.Errorf("Alloc(%d) = %v, %v; want ErrInvalidSize", n, c, err)
		}
	}
	if err := b.Close(); err != nil || j.String() != "release" {
		t.Fatalf("Close: %v, calls %s (invalid sizes must not leak references)", err, j)
	}
}

// TestConcurrentFree frees one chunk from many goroutines while others
// close the backend: exactly one Free succeeds, and the context is released
// exactly once.
func TestConcurrentFree(t *testing.T) {
	for range 20 {
		j := &journal{}
		b := fakeBackend(j, Options{Method: Register})
		chunks := []*Chunk{fakeChunk(t, b, j, 1), fakeChunk(t, b, j, 2)}
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for i := range 16 {
			wg.Go(func() {
				if err := chunks[i%2].Free(); err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				} else if !errors.Is(err, ErrFreed) {
					t.Error(err)
				}
			})
		}
		wg.Go(func() { b.Close() })
		wg.Wait()
		if ok != 2 || strings.Count(j.String(), "release") != 1 {
			t.Fatalf("%d Frees succeeded (want 2); calls %s", ok, j)
		}
	}
}
