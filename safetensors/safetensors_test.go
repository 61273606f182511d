package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

func file(t testing.TB, header string) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	tensors := []Tensor{
		{Name: "w", DType: "F32", Shape: []int64{2, 3}},
		{Name: "b", DType: "BF16", Shape: []int64{3}},
		{Name: "step", DType: "I64"},
		{Name: "empty", DType: "F16", Shape: []int64{0, 4}},
	}
	data := [][]byte{make([]byte, 24), {1, 2, 3, 4, 5, 6}, {7, 0, 0, 0, 0, 0, 0, 0}, {}}
	var b bytes.Buffer
	if err := Write(&b, tensors, data, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	h, err := ReadHeader(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if h.DataSize != 38 || h.DataOffset+h.DataSize != int64(b.Len()) || h.DataOffset%8 != 0 || h.Metadata["format"] != "pt" {
		t.Fatalf("header %+v, file %d bytes", h, b.Len())
	}
	bt, ok := h.Tensor("b")
	if !ok || bt.Begin != 24 || bt.Size() != 6 || bt.DType != "BF16" {
		t.Fatalf("tensor b: %+v", bt)
	}
	if got := b.Bytes()[h.DataOffset+bt.Begin : h.DataOffset+bt.End]; !bytes.Equal(got, data[1]) {
		t.Fatalf("tensor b's bytes %v", got)
	}
	if _, ok := h.Tensor("nope"); ok {
		t.Fatal("found a tensor that is not there")
	}
}

// padded pads a header with spaces to n bytes, so that a test can place
// its data section exactly.
func padded(t testing.TB, header string, n int) string {
	t.Helper()
	if len(header) > n {
		t.Fatalf("header of %d bytes does not fit in %d", len(header), n)
	}
	return header + strings.Repeat(" ", n-len(header))
}

func TestBadFiles(t *testing.T) {
	const huge = "9223372036854775797" // 2^63-11
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "length"},
		{"header past the end", file(t, `{}`)[:9], "header of 2 bytes"},
		{"not JSON", file(t, `{"a":`), "header"},
		{"null", file(t, `null`), "null where an object"},
		{"array", file(t, `[]`), "object"},
		{"text after the object", file(t, `{} {}`), "after"},
		{"unknown dtype", file(t, `{"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}}`), "unknown dtype"},
		{"lower-case dtype", file(t, `{"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}`), "unknown dtype"},
		{"size mismatch", file(t, `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`), "needs 2 elements"},
		{"gap", file(t, `{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`), "gap or an overlap"},
		{"overlap", file(t, `{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`), "gap or an overlap"},
		{"negative shape", file(t, `{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`), "shape"},
		{"overflowing shape", file(t, `{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`), "shape"},
		{"reversed offsets", file(t, `{"a":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}}`), "data_offsets"},
		{"three offsets", file(t, `{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0,0]}}`), "data_offsets"},
		{"fractional offset", file(t, `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1.0]}}`), "not an integer"},
		{"offset past 2^63", file(t, `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,9223372036854775808]}}`), "not an integer"},
		{"no shape", file(t, `{"a":{"dtype":"U8","data_offsets":[0,0]}}`), "needs dtype, shape and data_offsets"},
		{"null entry", file(t, `{"a":null}`), "null where an object"},
		{"data past the end", file(t, `{"a":{"dtype":"U8","shape":[9],"data_offsets":[0,9]}}`), "past the end"},
		// DataOffset+DataSize overflows int64 here: 113 + 2^63-11.
		{"data section of 2^63-11 bytes", file(t, padded(t, `{"a":{"dtype":"U8","shape":[`+huge+`],"data_offsets":[0,`+huge+`]}}`, 105)), "past the end"},
		{"bad metadata", file(t, `{"__metadata__":{"a":1}}`), "__metadata__"},
		{"null metadata", file(t, `{"__metadata__":null}`), "__metadata__"},
		{"two tensors of one name", file(t, `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`+"xx"), `"a" twice`},
		{"one name spelled two ways", file(t, `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"\u0061":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`+"xx"), `"a" twice`},
		{"a second __metadata__", file(t, `{"__metadata__":{"k":"v"},"__metadata__":{"k":"w"}}`), `"__metadata__" twice`},
		{"a key twice in an entry", file(t, `{"a":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}}`+"x"), `"dtype" twice`},
		{"a key twice in the metadata", file(t, `{"__metadata__":{"k":"v","k":"w"}}`), `"k" twice`},
		// encoding/json makes U+FFFD of both names, which would merge them.
		{"names not UTF-8", file(t, "{\"\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},\"\xfe\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}xx"), "UTF-8"},
		{"one name not UTF-8", file(t, "{\"a\xc0\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}x"), "UTF-8"},
		{"metadata not UTF-8", file(t, "{\"__metadata__\":{\"k\":\"\xed\xa0\x80\"}}"), "UTF-8"},
		{"lone high surrogate", file(t, `{"\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}x`), "surrogate"},
		{"lone low surrogate", file(t, `{"__metadata__":{"k":"\udc00"}}`), "surrogate"},
		{"high surrogate then another", file(t, `{"__metadata__":{"k":"\ud800\ud800"}}`), "surrogate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadHeader(bytes.NewReader(tc.file), int64(len(tc.file)))
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrFormat saying %q", err, tc.want)
			}
		})
	}
}

func TestGoodEscapes(t *testing.T) {
	b := file(t, `{"__metadata__":{"k":"\ud83d\ude00 \\ud800 \u00e9"}}`)
	h, err := ReadHeader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.Metadata["k"], "\U0001F600 \\ud800 é"; got != want {
		t.Fatalf("metadata %q, want %q", got, want)
	}
}

// eofAtEnd is an io.ReaderAt that returns io.EOF with a read that reaches
// the end of its data, as io.ReaderAt allows.
type eofAtEnd []byte

func (r eofAtEnd) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r)) {
		return 0, io.EOF
	}
	n := copy(p, r[off:])
	if off+int64(n) == int64(len(r)) {
		return n, io.EOF
	}
	return n, nil
}

// lyingReader claims to have read more than it was asked for.
type lyingReader []byte

func (r lyingReader) ReadAt(p []byte, off int64) (int, error) {
	copy(p, r[off:])
	return len(p) + 1, nil
}

func TestReaderAtContract(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, []Tensor{{Name: "x", DType: "U8", Shape: []int64{3}}}, [][]byte{{1, 2, 3}}, nil); err != nil {
		t.Fatal(err)
	}
	// The header alone, so that the read of the header ends the file.
	hdrOnly := file(t, `{}`)
	for _, tc := range []struct {
		name string
		r    io.ReaderAt
		size int64
		ok   bool
	}{
		{"EOF with the last read", eofAtEnd(hdrOnly), int64(len(hdrOnly)), true},
		{"EOF with a read inside", eofAtEnd(b.Bytes()), int64(b.Len()), true},
		{"short read", eofAtEnd(b.Bytes()[:10]), int64(b.Len()), false},
		{"count past the buffer", lyingReader(b.Bytes()), int64(b.Len()), false},
		{"negative size", eofAtEnd(nil), -1, false},
		{"size past the data", eofAtEnd(b.Bytes()), math.MaxInt64, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadHeader(tc.r, tc.size)
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrFormat) {
				t.Fatalf("got %v, want ok=%v (ErrFormat if not)", err, tc.ok)
			}
		})
	}
}

func TestWriteRefuses(t *testing.T) {
	u8 := func(name string, n int64) Tensor { return Tensor{Name: name, DType: "U8", Shape: []int64{n}} }
	for _, tc := range []struct {
		name    string
		tensors []Tensor
		data    [][]byte
		meta    map[string]string
		want    string
	}{
		{"data too short", []Tensor{{Name: "a", DType: "F32", Shape: []int64{2}}}, [][]byte{make([]byte, 4)}, nil, "needs 2 elements"},
		{"data too long", []Tensor{u8("a", 1)}, [][]byte{make([]byte, 2)}, nil, "needs 1 elements"},
		{"unknown dtype", []Tensor{{Name: "a", DType: "F99", Shape: []int64{1}}}, [][]byte{{0}}, nil, "unknown dtype"},
		{"lower-case dtype", []Tensor{{Name: "a", DType: "f32", Shape: []int64{1}}}, [][]byte{make([]byte, 4)}, nil, "unknown dtype"},
		{"two tensors of one name", []Tensor{u8("a", 1), u8("a", 1)}, [][]byte{{0}, {1}}, nil, "named twice"},
		{"a tensor named __metadata__", []Tensor{u8("__metadata__", 1)}, [][]byte{{0}}, nil, "metadata"},
		{"negative shape", []Tensor{{Name: "a", DType: "U8", Shape: []int64{-1, -1}}}, [][]byte{{0}}, nil, "shape"},
		{"overflowing shape", []Tensor{{Name: "a", DType: "F64", Shape: []int64{1 << 32, 1 << 32}}}, [][]byte{{}}, nil, "shape"},
		{"name not UTF-8", []Tensor{u8("\xff", 1)}, [][]byte{{0}}, nil, "UTF-8"},
		{"metadata not UTF-8", []Tensor{u8("a", 1)}, [][]byte{{0}}, map[string]string{"k": "\xff"}, "UTF-8"},
		{"more data than tensors", []Tensor{u8("a", 1)}, [][]byte{{0}, {1}}, nil, "1 tensors, 2 data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			err := Write(&b, tc.tensors, tc.data, tc.meta)
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrFormat saying %q", err, tc.want)
			}
			if b.Len() != 0 {
				t.Fatalf("wrote %d bytes of a file it refused", b.Len())
			}
		})
	}
}

// shortWriter takes one byte less than it is given and says nothing.
type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return max(len(p)-1, 0), nil }

func TestWriteShortWriter(t *testing.T) {
	err := Write(shortWriter{}, []Tensor{{Name: "a", DType: "U8", Shape: []int64{1}}}, [][]byte{{0}}, nil)
	if !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("got %v, want io.ErrShortWrite", err)
	}
}
