package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func file(t testing.TB, header string) []byte {
	t.Helper()
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

func TestBadFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "length"},
		{"header past the end", file(t, `{}`)[:9], "header of 2 bytes"},
		{"not JSON", file(t, `{"a":`), "header"},
		{"unknown dtype", file(t, `{"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}}`), "unknown dtype"},
		{"size mismatch", file(t, `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`), "needs 2 elements"},
		{"gap", file(t, `{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`), "gap or an overlap"},
		{"overlap", file(t, `{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`), "gap or an overlap"},
		{"negative shape", file(t, `{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`), "shape"},
		{"overflowing shape", file(t, `{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`), "shape"},
		{"reversed offsets", file(t, `{"a":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}}`), "data_offsets"},
		{"data past the end", file(t, `{"a":{"dtype":"U8","shape":[9],"data_offsets":[0,9]}}`), "past the end"},
		{"bad metadata", file(t, `{"__metadata__":{"a":1}}`), "__metadata__"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadHeader(bytes.NewReader(tc.file), int64(len(tc.file)))
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrFormat saying %q", err, tc.want)
			}
		})
	}
}

func FuzzReadHeader(f *testing.F) {
	f.Add(file(f, `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`+"\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add(file(f, `{"__metadata__":{"k":"v"},"x":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}`+"\x01"))
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
		if pos != h.DataSize || h.DataOffset+h.DataSize > int64(len(b)) {
			t.Fatalf("data section %d at %d in %d bytes", h.DataSize, h.DataOffset, len(b))
		}
	})
}
