package cuda

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// partsJournal records the calls of a fake register function and of the
// Free of the parts it makes.
type partsJournal struct {
	log   []string
	made  []*fakeRegPart
	freed []int // ids of freed parts, in order
}

func (j *partsJournal) String() string { return strings.Join(j.log, " ") }

// fakeRegPart stands for one cuMemHostRegister call.
type fakeRegPart struct {
	j       *partsJournal
	id      int // from 1, in call order
	mem     []byte
	freeErr error
}

func (p *fakeRegPart) Free() error {
	p.j.log = append(p.j.log, fmt.Sprintf("free%d", p.id))
	p.j.freed = append(p.j.freed, p.id)
	return p.freeErr
}

var (
	errFakeRegister = errors.New("fake register failure")
	errFakeUndo     = errors.New("fake unregister failure")
)

// register returns a register function that fails at call failAt (from 1;
// 0 never) and makes parts whose Free fails for part undoFail (0 none).
func (j *partsJournal) register(failAt, undoFail int) func([]byte) (*fakeRegPart, error) {
	calls := 0
	return func(b []byte) (*fakeRegPart, error) {
		calls++
		if calls == failAt {
			j.log = append(j.log, fmt.Sprintf("fail%d", calls))
			return nil, errFakeRegister
		}
		p := &fakeRegPart{j: j, id: calls, mem: b}
		if calls == undoFail {
			p.freeErr = errFakeUndo
		}
		j.made = append(j.made, p)
		j.log = append(j.log, fmt.Sprintf("reg%d:%d", calls, len(b)))
		return p, nil
	}
}

// alignedBuf returns n bytes that start lead bytes past a 64 KiB boundary,
// so that tests see the same split for every page size up to 64 KiB.
func alignedBuf(lead, n int) []byte {
	const align = 64 << 10
	raw := make([]byte, n+lead+align)
	off := int(-uintptr(unsafe.Pointer(&raw[0]))&(align-1)) + lead
	return raw[off : off+n : off+n]
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func TestRegisterInParts(t *testing.T) {
	const (
		kib = 1 << 10
		mib = 1 << 20
	)
	tests := []struct {
		name              string
		lead, size, chunk int // lead: mem's offset into its page
		page              int
		want              string
	}{
		// Page-aligned memory (cudahost's mmap'd chunks): parts of chunk
		// bytes from the start, the rest last.
		{"aligned 1 MiB parts", 0, 9 * mib, mib, 4096,
			"reg1:1048576 reg2:1048576 reg3:1048576 reg4:1048576 reg5:1048576 reg6:1048576 reg7:1048576 reg8:1048576 reg9:1048576"},
		{"aligned remainder", 0, 9*mib + 4096, 4 * mib, 4096, "reg1:4194304 reg2:4194304 reg3:1052672"},
		{"aligned default chunk", 0, 3 * mib, DefaultRegisterChunk, 4096, "reg1:3145728"},
		{"aligned one page", 0, 4096, 4096, 4096, "reg1:4096"},
		{"aligned two pages", 0, 8192, 4096, 4096, "reg1:4096 reg2:4096"},
		{"aligned 64 KiB pages", 0, 3 * 64 * kib, 64 * kib, 64 * kib, "reg1:65536 reg2:65536 reg3:65536"},

		// Unaligned memory (transfer's Go slices): boundaries on pages, a
		// chunk past the start of mem's first page.
		{"unaligned", 4, 8192, 4096, 4096, "reg1:4092 reg2:4096 reg3:4"},
		{"unaligned small", 4, 10, 1 << 30, 4096, "reg1:10"},
		{"unaligned within a page", 100, 200, 4096, 4096, "reg1:200"},
		{"unaligned to a boundary", 96, 4000, 4096, 4096, "reg1:4000"},
		{"unaligned past a boundary", 96, 4001, 4096, 4096, "reg1:4000 reg2:1"},
		{"unaligned 64 KiB", 123, 2*64*kib + 77, 64 * kib, 64 * kib, "reg1:65413 reg2:65536 reg3:200"},

		// chunk is rounded up to the page size; zero or negative is the
		// default.
		{"chunk rounded up", 0, 5 * 4096, 5000, 4096, "reg1:8192 reg2:8192 reg3:4096"},
		{"chunk below a 64 KiB page", 0, 3 * 64 * kib, 4096, 64 * kib, "reg1:65536 reg2:65536 reg3:65536"},
		{"zero chunk", 4, 3 * mib, 0, 4096, "reg1:3145728"},
		{"negative chunk", 4, 3 * mib, -4096, 4096, "reg1:3145728"},
		{"huge chunk", 4, 3 * mib, math.MaxInt, 4096, "reg1:3145728"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := alignedBuf(tt.lead, tt.size)
			j := &partsJournal{}
			parts, err := registerInParts(mem, tt.chunk, tt.page, j.register(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			if j.String() != tt.want || len(parts) != len(j.made) {
				t.Fatalf("calls %s; want %s", j, tt.want)
			}
			off := 0
			for i, p := range parts {
				if p != j.made[i] || addr(p.mem) != addr(mem)+uintptr(off) || cap(p.mem) != len(p.mem) {
					t.Errorf("part %d does not start at offset %d or has spare capacity", p.id, off)
				}
				off += len(p.mem)
			}
			if off != len(mem) || len(j.freed) != 0 {
				t.Errorf("parts cover %d of %d bytes; %d freed", off, len(mem), len(j.freed))
			}
		})
	}
}

// TestRegisterInPartsSystemPage checks the exported function against the
// system page size.
func TestRegisterInPartsSystemPage(t *testing.T) {
	page := os.Getpagesize()
	for _, lead := range []int{0, 1, page / 2, page - 1} {
		mem := alignedBuf(lead, 5*page+3)
		j := &partsJournal{}
		parts, err := RegisterInParts(mem, 2*page, j.register(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("reg1:%d reg2:%d reg3:%d", 2*page-lead, 2*page, page+3+lead)
		if lead+3 > page {
			want = fmt.Sprintf("reg1:%d reg2:%d reg3:%d reg4:%d", 2*page-lead, 2*page, 2*page, lead+3-page)
		}
		if j.String() != want || len(parts) != len(j.made) {
			t.Errorf("lead %d: calls %s; want %s", lead, j, want)
		}
	}
}

func TestRegisterInPartsFailure(t *testing.T) {
	j := &partsJournal{}
	mem := alignedBuf(0, 6<<20)
	parts, err := registerInParts(mem, 1<<20, 4096, j.register(4, 0))
	if parts != nil || !errors.Is(err, errFakeRegister) {
		t.Fatalf("registerInParts = %v, %v; want the register error", parts, err)
	}
	// Everything registered is undone, last first.
	if want := "reg1:1048576 reg2:1048576 reg3:1048576 fail4 free3 free2 free1"; j.String() != want {
		t.Fatalf("calls %s; want %s", j, want)
	}
	for _, s := range []string{"[3145728, 4194304) of 6291456", fmt.Sprintf("at %#x", addr(mem)), "(part 4 of 6)", errFakeRegister.Error()} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}

	// The first part fails: nothing to undo.
	j = &partsJournal{}
	if _, err := registerInParts(mem, 1<<20, 4096, j.register(1, 0)); !errors.Is(err, errFakeRegister) || j.String() != "fail1" {
		t.Fatalf("first part: %v, calls %s", err, j)
	}
}

func TestRegisterInPartsUndoFailure(t *testing.T) {
	j := &partsJournal{}
	_, err := registerInParts(alignedBuf(0, 3<<20), 1<<20, 4096, j.register(3, 1))
	if !errors.Is(err, errFakeRegister) || !errors.Is(err, errFakeUndo) {
		t.Fatalf("registerInParts = %v; want both the register and the undo error", err)
	}
	if want := "reg1:1048576 reg2:1048576 fail3 free2 free1"; j.String() != want {
		t.Fatalf("calls %s; want %s", j, want)
	}
	if !strings.Contains(err.Error(), "undoing part 1: "+errFakeUndo.Error()) {
		t.Errorf("error %q does not name the part it could not undo", err)
	}
}

func TestRegisterInPartsEmpty(t *testing.T) {
	for _, mem := range [][]byte{nil, {}, make([]byte, 10)[5:5]} {
		j := &partsJournal{}
		if parts, err := RegisterInParts(mem, 4096, j.register(0, 0)); parts != nil || !errors.Is(err, ErrSize) || len(j.log) != 0 {
			t.Errorf("RegisterInParts(%d bytes) = %v, %v; calls %s", len(mem), parts, err, j)
		}
	}
}

func TestRegisterChunkSize(t *testing.T) {
	const maxChunk = math.MaxInt64 &^ 4095
	for _, tt := range []struct {
		n, page, want int64
		ok            bool
	}{
		{0, 4096, DefaultRegisterChunk, true},
		{0, 65536, DefaultRegisterChunk, true},
		{4096, 4096, 4096, true},
		{4096, 65536, 65536, true},
		{5 * 4096, 16384, 8 * 4096, true},
		{1 << 20, 65536, 1 << 20, true},
		{maxChunk, 4096, maxChunk, true},
		{maxChunk, 65536, 0, false}, // would overflow
		{-4096, 4096, 0, false},
		{-1, 4096, 0, false},
		{1, 4096, 0, false},
		{5000, 4096, 0, false},
		{2048, 4096, 0, false},
		{4096 + 2048, 65536, 0, false},
	} {
		got, err := registerChunkSize(tt.n, tt.page)
		if tt.ok != (err == nil) || tt.ok && got != tt.want {
			t.Errorf("registerChunkSize(%d, page %d) = %d, %v; want %d, ok %v", tt.n, tt.page, got, err, tt.want, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("RegisterChunk %d", tt.n)) {
			t.Errorf("error %q does not name the value", err)
		}
	}
	page := int64(os.Getpagesize())
	if got, err := RegisterChunkSize(4096); err != nil || got != max(4096, page) {
		t.Errorf("RegisterChunkSize(4096) = %d, %v with %d-byte pages", got, err, page)
	}
	if got, err := RegisterChunkSize(0); err != nil || got != DefaultRegisterChunk {
		t.Errorf("RegisterChunkSize(0) = %d, %v", got, err)
	}
	if _, err := RegisterChunkSize(100); err == nil || !strings.Contains(err.Error(), "multiple of 4096") {
		t.Errorf("RegisterChunkSize(100) = %v", err)
	}
}

// fuzzBuf is the memory FuzzRegisterInParts slices its ranges from.
const fuzzBufSize = 1<<20 + 1<<17

var fuzzPages = [...]int{4096, 16384, 65536}

// FuzzRegisterInParts checks, for any start offset, length, chunk and page
// size, that the parts tile mem exactly and in order, none larger than the
// chunk (rounded up to the page), every boundary on a page and a whole
// number of chunks past mem's first page, with as few parts as that allows;
// and that a failure frees exactly the parts registered before it, last
// first, and reports the failing part.
func FuzzRegisterInParts(f *testing.F) {
	f.Add(uint32(0), uint32(9<<16), int64(1<<16), uint8(0), uint16(0), uint16(0))
	f.Add(uint32(4), uint32(8192), int64(4096), uint8(0), uint16(3), uint16(1))
	f.Add(uint32(123), uint32(1<<20+77), int64(64<<10), uint8(2), uint16(5), uint16(0))
	f.Add(uint32(7), uint32(100000), int64(5000), uint8(1), uint16(2), uint16(1))
	f.Add(uint32(0), uint32(0), int64(4096), uint8(3), uint16(0), uint16(0))
	f.Add(uint32(1), uint32(300000), int64(0), uint8(3), uint16(1), uint16(0))
	f.Add(uint32(4095), uint32(1<<20), int64(math.MaxInt64), uint8(0), uint16(0), uint16(0))
	f.Add(uint32(2048), uint32(1<<20), int64(-1), uint8(1), uint16(0), uint16(0))
	buf := alignedBuf(0, fuzzBufSize)
	f.Fuzz(func(t *testing.T, lead, size uint32, chunk64 int64, pageSel uint8, failAt, undoFail uint16) {
		page := os.Getpagesize()
		if i := int(pageSel) % (len(fuzzPages) + 1); i < len(fuzzPages) {
			page = fuzzPages[i]
		}
		off := int(lead) % (2 * 65536)
		mem := buf[off : off+int(size)%(fuzzBufSize-off+1)]
		chunk := int(chunk64)
		// The chunk as the parts see it.
		want := chunk
		if want <= 0 {
			want = DefaultRegisterChunk
		}
		if want > math.MaxInt-page {
			want = want / page * page
		} else {
			want = (want + page - 1) / page * page
		}

		j := &partsJournal{}
		register := j.register(int(failAt), int(undoFail))
		var parts []*fakeRegPart
		var err error
		if page == os.Getpagesize() {
			parts, err = RegisterInParts(mem, chunk, register)
		} else {
			parts, err = registerInParts(mem, chunk, page, register)
		}

		if len(mem) == 0 {
			if parts != nil || !errors.Is(err, ErrSize) || len(j.log) != 0 {
				t.Fatalf("empty: %v, %v, calls %s", parts, err, j)
			}
			return
		}
		start := addr(mem)
		first := start &^ uintptr(page-1) // mem's page; boundaries are chunks past it
		wantCount := int((start+uintptr(len(mem))-1-first)/uintptr(want)) + 1

		// Whatever was made tiles a prefix of mem, in order.
		pos := 0
		for i, p := range j.made {
			if p.id != i+1 || addr(p.mem) != start+uintptr(pos) || len(p.mem) == 0 || cap(p.mem) != len(p.mem) {
				t.Fatalf("part %d: %d bytes at offset %d (cap %d); want offset %d", p.id, len(p.mem), addr(p.mem)-start, cap(p.mem), pos)
			}
			s, e := addr(p.mem), addr(p.mem)+uintptr(len(p.mem))
			if len(p.mem) > want {
				t.Fatalf("part %d: %d bytes, more than the chunk %d", p.id, len(p.mem), want)
			}
			if i > 0 && (s%uintptr(page) != 0 || (s-first)%uintptr(want) != 0) {
				t.Fatalf("part %d starts at %#x: not on a %d-byte page and a multiple of %d past %#x", p.id, s, page, want, first)
			}
			if (s-first)/uintptr(want) != (e-1-first)/uintptr(want) {
				t.Fatalf("part %d [%#x, %#x) spans a boundary (chunk %d from %#x)", p.id, s, e, want, first)
			}
			pos += len(p.mem)
		}

		if f := int(failAt); f >= 1 && f <= wantCount {
			// A failure: exactly the parts before it are freed, last first.
			if parts != nil || !errors.Is(err, errFakeRegister) || len(j.made) != f-1 {
				t.Fatalf("failing at part %d of %d: %d parts returned, %d made, %v", f, wantCount, len(parts), len(j.made), err)
			}
			if len(j.freed) != f-1 {
				t.Fatalf("failing at part %d: freed %v", f, j.freed)
			}
			for i, id := range j.freed {
				if id != f-1-i {
					t.Fatalf("failing at part %d: freed %v; want last first", f, j.freed)
				}
			}
			if u := int(undoFail); u >= 1 && u < f {
				if !errors.Is(err, errFakeUndo) || !strings.Contains(err.Error(), fmt.Sprintf("undoing part %d: ", u)) {
					t.Fatalf("undo failure of part %d not reported: %v", u, err)
				}
			} else if errors.Is(err, errFakeUndo) {
				t.Fatalf("undo failure reported with none: %v", err)
			}
			n := min(want-int(start-first), len(mem)) // the first part's length
			if f > 1 {
				n = min(want, len(mem)-pos)
			}
			if msg := fmt.Sprintf("bytes [%d, %d) of %d at %#x (part %d of %d)", pos, pos+n, len(mem), start, f, wantCount); !strings.Contains(err.Error(), msg) {
				t.Fatalf("error %q does not contain %q", err, msg)
			}
			return
		}

		// Success: the parts cover mem exactly, none freed.
		if err != nil || len(parts) != wantCount || len(j.made) != wantCount || pos != len(mem) || len(j.freed) != 0 {
			t.Fatalf("%d parts (made %d, want %d) cover %d of %d bytes, freed %v: %v", len(parts), len(j.made), wantCount, pos, len(mem), j.freed, err)
		}
		for i, p := range parts {
			if p != j.made[i] {
				t.Fatalf("part %d returned out of order", i+1)
			}
		}
	})
}
