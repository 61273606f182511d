package safetensors

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// rawFile writes what a writer that checks nothing would write for the
// tensors: the same JSON layout as Write, each string's bytes as they
// are (not made valid UTF-8 as encoding/json would), every name as given.
// It is what ReadHeader must judge as Write judges the tensors.
func rawFile(tensors []Tensor, data [][]byte, meta map[string]string) []byte {
	quote := func(b *strings.Builder, s string) {
		b.WriteByte('"')
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c < 0x20:
				fmt.Fprintf(b, `\u%04x`, c)
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte('"')
	}
	var h strings.Builder
	h.WriteByte('{')
	sep := func() {
		if h.Len() > 1 {
			h.WriteByte(',')
		}
	}
	if len(meta) > 0 {
		h.WriteString(`"__metadata__":{`)
		for i, k := range slices.Sorted(maps.Keys(meta)) {
			if i > 0 {
				h.WriteByte(',')
			}
			quote(&h, k)
			h.WriteByte(':')
			quote(&h, meta[k])
		}
		h.WriteByte('}')
	}
	var pos int64
	for i, t := range tensors {
		sep()
		quote(&h, t.Name)
		h.WriteString(`:{"dtype":`)
		quote(&h, t.DType)
		h.WriteString(`,"shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				h.WriteByte(',')
			}
			fmt.Fprint(&h, d)
		}
		fmt.Fprintf(&h, `],"data_offsets":[%d,%d]}`, pos, pos+int64(len(data[i])))
		pos += int64(len(data[i]))
	}
	h.WriteByte('}')
	f := file(nil, h.String())
	for _, d := range data {
		f = append(f, d...)
	}
	return f
}

// sameHeader reports how h differs from the tensors and metadata that
// were written, or "".
func sameHeader(h *Header, tensors []Tensor, data [][]byte, meta map[string]string, f []byte) string {
	if len(h.Tensors) != len(tensors) {
		return fmt.Sprintf("%d tensors read, %d written", len(h.Tensors), len(tensors))
	}
	var pos int64
	for i, w := range tensors {
		r, ok := h.Tensor(w.Name)
		if !ok {
			return fmt.Sprintf("tensor %q not read", w.Name)
		}
		if r.DType != w.DType || !slices.Equal(r.Shape, w.Shape) || r.Begin != pos || r.End != pos+int64(len(data[i])) {
			return fmt.Sprintf("tensor read %+v, written %+v at %d", r, w, pos)
		}
		off, n, err := h.FileRange(w.Name, int64(len(f)))
		if err != nil || !bytes.Equal(f[off:off+n], data[i]) {
			return fmt.Sprintf("tensor %q's bytes at %d+%d (%v) are not those written", w.Name, off, n, err)
		}
		pos += int64(len(data[i]))
	}
	if !maps.Equal(h.Metadata, meta) {
		return fmt.Sprintf("metadata read %q, written %q", h.Metadata, meta)
	}
	return ""
}

// FuzzRoundTrip holds Write and ReadHeader to one set of rules: what Write
// accepts, ReadHeader accepts and returns as written; what Write refuses,
// ReadHeader refuses in the file a writer that checks nothing would make.
func FuzzRoundTrip(f *testing.F) {
	f.Add("w", "F32", int64(2), int64(3), uint16(24), "b", "BF16", int64(3), uint16(6), "format", "pt")
	f.Add("a", "U8", int64(1), int64(1), uint16(1), "a", "U8", int64(1), uint16(1), "", "")
	f.Add("__metadata__", "U8", int64(0), int64(0), uint16(0), "x", "F99", int64(1), uint16(1), "k", "\xff")
	f.Add("\xff", "I64", int64(-1), int64(-1), uint16(8), "\xfe", "f32", int64(1)<<32, uint16(0), "\xed\xa0\x80", "v")
	f.Add("e", "F16", int64(0), int64(4), uint16(0), "", "BOOL", int64(0), uint16(0), "", "")
	f.Fuzz(func(t *testing.T, name1, dtype1 string, d1a, d1b int64, n1 uint16, name2, dtype2 string, d2 int64, n2 uint16, mk, mv string) {
		tensors := []Tensor{{Name: name1, DType: dtype1, Shape: []int64{d1a, d1b}}, {Name: name2, DType: dtype2, Shape: []int64{d2}}}
		data := [][]byte{bytes.Repeat([]byte{1}, int(n1)), bytes.Repeat([]byte{2}, int(n2))}
		var meta map[string]string
		if mk != "" || mv != "" {
			meta = map[string]string{mk: mv}
		}
		var b bytes.Buffer
		werr := Write(&b, tensors, data, meta)
		if werr != nil && !errors.Is(werr, ErrFormat) {
			t.Fatalf("Write: %v, not ErrFormat", werr)
		}
		if werr != nil && b.Len() != 0 {
			t.Fatalf("Write refused (%v) after writing %d bytes", werr, b.Len())
		}
		raw := rawFile(tensors, data, meta)
		h, rerr := ReadHeader(bytes.NewReader(raw), int64(len(raw)))
		if rerr != nil && !errors.Is(rerr, ErrFormat) {
			t.Fatalf("ReadHeader: %v, not ErrFormat", rerr)
		}
		if (werr == nil) != (rerr == nil) {
			t.Fatalf("Write says %v, ReadHeader of the same file says %v", werr, rerr)
		}
		if werr != nil {
			return
		}
		if d := sameHeader(h, tensors, data, meta, raw); d != "" {
			t.Fatalf("raw file: %s", d)
		}
		h, err := ReadHeader(bytes.NewReader(b.Bytes()), int64(b.Len()))
		if err != nil {
			t.Fatalf("ReadHeader of what Write wrote: %v", err)
		}
		if d := sameHeader(h, tensors, data, meta, b.Bytes()); d != "" {
			t.Fatalf("Write's file: %s", d)
		}
	})
}

// FuzzReadHeader feeds arbitrary bytes to ReadHeader: it refuses with
// ErrFormat or returns a header whose tensors tile a data section inside
// the file, that Write writes again as it was read.
func FuzzReadHeader(f *testing.F) {
	f.Add(file(f, `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`+"\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add(file(f, `{"__metadata__":{"k":"v"},"x":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}`+"\x01"))
	f.Add(file(f, `{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`))
	f.Add(file(f, `{"\ud83d\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":[{}]}}`+"\x01"))
	f.Add(file(f, `null`))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ReadHeader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error not ErrFormat: %v", err)
			}
			return
		}
		var pos int64
		for _, tn := range h.Tensors {
			if tn.Begin != pos || tn.End < tn.Begin {
				t.Fatalf("tensors not contiguous: %+v", h.Tensors)
			}
			pos = tn.End
		}
		if pos != h.DataSize || h.DataOffset < 8 || h.DataSize > int64(len(b))-h.DataOffset {
			t.Fatalf("data section %d at %d in %d bytes", h.DataSize, h.DataOffset, len(b))
		}
		data := make([][]byte, len(h.Tensors))
		for i, tn := range h.Tensors {
			off, n, err := h.FileRange(tn.Name, int64(len(b)))
			if err != nil {
				t.Fatalf("FileRange of a header ReadHeader accepted: %v", err)
			}
			data[i] = b[off : off+n]
		}
		var w bytes.Buffer
		if err := Write(&w, h.Tensors, data, h.Metadata); err != nil {
			t.Fatalf("Write refuses what ReadHeader accepted: %v", err)
		}
		h2, err := ReadHeader(bytes.NewReader(w.Bytes()), int64(w.Len()))
		if err != nil {
			t.Fatalf("ReadHeader of the file written again: %v", err)
		}
		if d := sameHeader(h2, h.Tensors, data, h.Metadata, w.Bytes()); d != "" {
			t.Fatalf("written again: %s", d)
		}
	})
}

func TestFileRange(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, []Tensor{{Name: "a", DType: "U8", Shape: []int64{2}}, {Name: "b", DType: "U8", Shape: []int64{3}}}, [][]byte{{1, 2}, {3, 4, 5}}, nil); err != nil {
		t.Fatal(err)
	}
	size := int64(b.Len())
	h, err := ReadHeader(bytes.NewReader(b.Bytes()), size)
	if err != nil {
		t.Fatal(err)
	}
	off, n, err := h.FileRange("b", size)
	if err != nil || !bytes.Equal(b.Bytes()[off:off+n], []byte{3, 4, 5}) {
		t.Fatalf("FileRange(b) = %d, %d, %v", off, n, err)
	}
	if _, _, err := h.FileRange("c", size); !errors.Is(err, ErrNoTensor) {
		t.Fatalf("FileRange of a missing tensor: %v", err)
	}
	if _, _, err := h.FileRange("b", size-1); !errors.Is(err, ErrFormat) {
		t.Fatalf("FileRange in a file one byte short: %v", err)
	}
	// A header changed by hand so that DataOffset+End overflows.
	bad := *h
	bad.DataOffset = 1 << 62
	bad.DataSize = 1<<63 - 1
	bad.Tensors = []Tensor{{Name: "x", DType: "U8", Begin: 0, End: 1<<63 - 1}}
	if _, _, err := bad.FileRange("x", 1<<63-1); !errors.Is(err, ErrFormat) {
		t.Fatalf("FileRange of an overflowing header: %v", err)
	}
}
