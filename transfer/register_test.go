package transfer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"unsafe"
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
	// A range that sticks out of the registration is staged.
	if p := e.c.PathOf(raw[off-1 : off+10]); p != PathStaged {
		t.Fatalf("partly registered: %v", p)
	}
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

func TestPartRanges(t *testing.T) {
	for _, c := range []struct {
		start uintptr
		n     int
		chunk int
		want  []regPart
	}{
		{4096, 8192, 4096, []regPart{{start: 4096, end: 8192}, {start: 8192, end: 12288}}},
		{4100, 8192, 4096, []regPart{{start: 4100, end: 8192}, {start: 8192, end: 12288}, {start: 12288, end: 12292}}},
		{4100, 10, 1 << 30, []regPart{{start: 4100, end: 4110}}},
	} {
		got := partRanges(c.start, c.n, c.chunk)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("partRanges(%d, %d, %d) = %v, want %v", c.start, c.n, c.chunk, got, c.want)
		}
	}
}
