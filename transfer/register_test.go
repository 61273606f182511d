package transfer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/pinpool/pinpool/cuda"
)

// TestRegister registers memory in small parts and copies ranges inside it,
// across part boundaries: the fake device refuses (and records) any copy
// that spans two registrations, so passing proves the split.
func TestRegister(t *testing.T) {
	const part = 64 << 10
	ctx := context.Background()
	e := newEnv(t, Options{ChunkSize: testChunk, RegisterChunk: part, DirectBelow: -1})
	page := os.Getpagesize()
	raw := make([]byte, 1<<20+3*page)
	off := int(-uintptr(unsafe.Pointer(&raw[0]))&uintptr(page-1)) + 123 // not page-aligned
	mem := raw[off : off+1<<20+77]
	copy(mem, randomBytes(len(mem), 1))
	r, err := e.c.Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	// Parts end on multiples of part counted from the first page.
	if want := (123 + len(mem) + part - 1) / part; r.Parts() != want {
		t.Fatalf("%d parts, want %d", r.Parts(), want)
	}
	if len(r.Bytes()) != len(mem) {
		t.Fatal("Bytes")
	}
	// The parts tile mem, split on pages a multiple of part past its first.
	first := uintptr(unsafe.Pointer(&mem[0])) &^ uintptr(page-1)
	next := uintptr(unsafe.Pointer(&mem[0]))
	for i, p := range r.parts {
		if p.start != next || p.end <= p.start || p.end-p.start > part || i > 0 && (p.start%uintptr(page) != 0 || (p.start-first)%part != 0) {
			t.Fatalf("part %d is [%#x, %#x); want it to start at %#x on a boundary", i+1, p.start, p.end, next)
		}
		next = p.end
	}
	if next != uintptr(unsafe.Pointer(&mem[0]))+uintptr(len(mem)) {
		t.Fatalf("parts end at %#x", next)
	}
	dev := e.d.alloc(len(mem))
	for _, rg := range [][2]int{{0, len(mem)}, {0, 1}, {part - 200, part + 300}, {5, 3*part + 9}, {len(mem) - 1, len(mem)}} {
		t.Run(fmt.Sprint(rg), func(t *testing.T) {
			b := mem[rg[0]:rg[1]]
			if p := e.c.PathOf(b); p != PathRegistered {
				t.Fatalf("path %v", p)
			}
			if err := e.c.ToDevice(ctx, dev, b); err != nil {
				t.Fatal(err)
			}
			sameBytes(t, "device", e.devBytes(dev, len(b)), b)
			want := randomBytes(len(b), uint64(rg[0]))
			e.setDev(dev, want)
			if err := e.c.FromDevice(ctx, b, dev); err != nil {
				t.Fatal(err)
			}
			sameBytes(t, "back", b, want)
		})
	}
	st := e.c.Stats()
	if st.ToDevice.Registered.Transfers != 5 || st.FromDevice.Registered.Transfers != 5 || st.Chunks != 0 {
		t.Fatalf("stats %+v", st)
	}
	// A range that sticks out of the registration copies: its registered
	// part directly, the rest staged; PathOf names the path of most bytes.
	out := raw[off-1 : off+10]
	if p := e.c.PathOf(out); p != PathRegistered {
		t.Fatalf("partly registered: %v", p)
	}
	if p := e.c.PathOf(raw[off-20 : off+10]); p != PathStaged {
		t.Fatalf("mostly pageable: %v", p)
	}
	if err := e.c.ToDevice(ctx, dev, out); err != nil {
		t.Fatalf("partly registered: %v", err)
	}
	sameBytes(t, "partly registered, on the device", e.devBytes(dev, len(out)), out)
	if _, err := e.c.Register(mem[100:200]); !errors.Is(err, ErrAlreadyRegistered) || !errors.Is(err, ErrRegister) {
		t.Fatalf("overlap: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if p := e.c.PathOf(mem); p != PathStaged {
		t.Fatalf("after Close: %v", p)
	}
	if n := len(e.d.regs); n != 0 {
		t.Fatalf("%d registrations left", n)
	}
	// Register again, and leave it to Copier.Close.
	if _, err := e.c.Register(mem); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(e.d.regs); n != 0 {
		t.Fatalf("%d registrations left after Copier.Close", n)
	}
}

func TestRegisterRefused(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Options{RegisterChunk: 4096})
	if _, err := e.c.Register(nil); !errors.Is(err, ErrRegister) {
		t.Fatalf("empty: %v", err)
	}
	buf, err := e.pool.Get(ctx, 10000)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Release()
	if _, err := e.c.Register(buf.Bytes()); !errors.Is(err, ErrAlreadyRegistered) {
		t.Fatalf("pool memory: %v", err)
	}
	// The driver refuses the third part: the first two are undone.
	calls := 0
	e.d.failRegister = func([]byte) error {
		if calls++; calls == 3 {
			return errInjected
		}
		return nil
	}
	mem := make([]byte, 10*4096)
	if _, err := e.c.Register(mem); !errors.Is(err, ErrRegister) || !errors.Is(err, errInjected) {
		t.Fatalf("injected: %v", err)
	}
	if n := len(e.d.regs); n != 0 || calls != 3 {
		t.Fatalf("%d registrations left after a failed Register (%d calls)", n, calls)
	}
	e.d.failRegister = nil
	// Memory the driver already has (registered by other code).
	other, err := e.d.register(mem[:4096])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Register(mem); !errors.Is(err, ErrAlreadyRegistered) {
		t.Fatalf("registered elsewhere: %v", err)
	}
	other.Free()
}

// TestRegisterPartRefused checks that a part the driver refuses as
// already registered fails Register with ErrAlreadyRegistered, naming the
// part, and that the parts before it are undone.
func TestRegisterPartRefused(t *testing.T) {
	page := os.Getpagesize()
	e := newEnv(t, Options{RegisterChunk: int64(page)})
	raw := make([]byte, 6*page)
	off := int(-uintptr(unsafe.Pointer(&raw[0])) & uintptr(page-1))
	mem := raw[off : off+5*page]
	// Other code registered the third page.
	other, err := e.d.register(mem[2*page : 3*page])
	if err != nil {
		t.Fatal(err)
	}
	defer other.Free()
	_, err = e.c.Register(mem)
	if !errors.Is(err, ErrAlreadyRegistered) || !errors.Is(err, ErrRegister) || !errors.Is(err, cuda.ErrAlreadyRegistered) {
		t.Fatalf("Register = %v; want ErrAlreadyRegistered", err)
	}
	for _, s := range []string{"transfer: ", fmt.Sprintf("bytes [%d, %d) of %d", 2*page, 3*page, 5*page), "(part 3 of 5)"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
	if n := len(e.d.regs); n != 1 {
		t.Fatalf("%d registrations left; want only the other one", n)
	}
	if p := e.c.PathOf(mem); p == PathRegistered {
		t.Fatalf("path %v after a failed Register", p)
	}
}
