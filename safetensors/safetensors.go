// Package safetensors reads the header of a safetensors file, the format
// in which PyTorch, Hugging Face and others store model weights: an
// 8-byte little-endian header length, a JSON header that names every
// tensor with its dtype, shape and byte range, then the tensors' bytes.
// It reads no tensor data: a loader such as transfer.Copier's
// ToDeviceFromFile moves the data section (Header.DataOffset,
// Header.DataSize) to one device allocation, where each tensor lies at its
// Begin.
package safetensors

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// ErrFormat is wrapped by every error about a file that is not a valid
// safetensors file; the message says what is wrong.
var ErrFormat = errors.New("safetensors: invalid file")

// MaxHeaderSize is the largest JSON header accepted (100 MB, as the
// reference implementation).
const MaxHeaderSize = 100 << 20

// Tensor is one tensor of a file: its bytes are [Begin, End) of the data
// section.
type Tensor struct {
	Name       string
	DType      string  // "F32", "BF16", "I64", ...
	Shape      []int64 // empty for a scalar
	Begin, End int64
}

// Size is the tensor's size in bytes.
func (t Tensor) Size() int64 { return t.End - t.Begin }

// Header is a parsed safetensors header.
type Header struct {
	Tensors    []Tensor          // by Begin
	Metadata   map[string]string // the "__metadata__" entry, if any
	DataOffset int64             // where the data section starts in the file: 8 + the header's length
	DataSize   int64             // bytes of the data section: the End of the last tensor
}

// Tensor returns the tensor of that name.
func (h *Header) Tensor(name string) (Tensor, bool) {
	for _, t := range h.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// DTypeSize returns the size in bytes of one element of dtype, and false
// for a dtype this package does not know.
func DTypeSize(dtype string) (int, bool) {
	n, ok := dtypeSizes[dtype]
	return n, ok
}

// ReadHeader reads and checks the header of a safetensors file of size
// bytes (the file's size, to check that the data section fits in it).
func ReadHeader(r io.ReaderAt, size int64) (*Header, error) {
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("%w: reading the header's length: %w", ErrFormat, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize || int64(n) > size-8 {
		return nil, fmt.Errorf("%w: header of %d bytes in a file of %d", ErrFormat, n, size)
	}
	js := make([]byte, n)
	if _, err := r.ReadAt(js, 8); err != nil {
		return nil, fmt.Errorf("%w: reading the header: %w", ErrFormat, err)
	}
	h, err := ParseHeader(js)
	if err != nil {
		return nil, err
	}
	h.DataOffset = 8 + int64(n)
	if h.DataOffset+h.DataSize > size {
		return nil, fmt.Errorf("%w: data section of %d bytes at %d runs past the end of the file (%d bytes)", ErrFormat, h.DataSize, h.DataOffset, size)
	}
	return h, nil
}

// ParseHeader parses and checks the JSON header alone (DataOffset is left
// 0): every tensor's dtype known, its byte range as long as its shape
// says, and the ranges one after the other from 0 with no gap or overlap.
func ParseHeader(js []byte) (*Header, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrFormat, err)
	}
	h := &Header{}
	for name, v := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &h.Metadata); err != nil {
				return nil, fmt.Errorf("%w: __metadata__: %w", ErrFormat, err)
			}
			continue
		}
		var e struct {
			DType   string  `json:"dtype"`
			Shape   []int64 `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %w", ErrFormat, name, err)
		}
		t, err := tensorOf(name, e.DType, e.Shape, e.Offsets)
		if err != nil {
			return nil, err
		}
		h.Tensors = append(h.Tensors, t)
	}
	slices.SortFunc(h.Tensors, func(a, b Tensor) int {
		return cmp.Or(cmp.Compare(a.Begin, b.Begin), cmp.Compare(a.End, b.End))
	})
	var pos int64
	for _, t := range h.Tensors {
		if t.Begin != pos {
			return nil, fmt.Errorf("%w: tensor %q begins at %d, where %d was expected (a gap or an overlap)", ErrFormat, t.Name, t.Begin, pos)
		}
		pos = t.End
	}
	h.DataSize = pos
	return h, nil
}

func tensorOf(name, dtype string, shape, offsets []int64) (Tensor, error) {
	bad := func(format string, args ...any) (Tensor, error) {
		return Tensor{}, fmt.Errorf("%w: tensor %q: %s", ErrFormat, name, fmt.Sprintf(format, args...))
	}
	size, ok := DTypeSize(dtype)
	if !ok {
		return bad("unknown dtype %q", dtype)
	}
	if len(offsets) != 2 || offsets[0] < 0 || offsets[1] < offsets[0] {
		return bad("data_offsets %v", offsets)
	}
	elems := int64(1)
	for _, d := range shape {
		if d < 0 || d > 0 && elems > math.MaxInt64/d {
			return bad("shape %v", shape)
		}
		elems *= d
	}
	if elems > math.MaxInt64/int64(size) || elems*int64(size) != offsets[1]-offsets[0] {
		return bad("shape %v of %s needs %d elements of %d bytes, data_offsets %v hold %d bytes", shape, dtype, elems, size, offsets, offsets[1]-offsets[0])
	}
	return Tensor{Name: name, DType: dtype, Shape: shape, Begin: offsets[0], End: offsets[1]}, nil
}

// Write writes a safetensors file of the tensors, whose bytes data gives
// in the order of tensors (each Tensor's Begin and End are set from it),
// with the metadata, if any. It is what the tests and examples use to
// make files; PyTorch's save_file writes the same format.
func Write(w io.Writer, tensors []Tensor, data [][]byte, metadata map[string]string) error {
	if len(tensors) != len(data) {
		return fmt.Errorf("safetensors: %d tensors, %d data", len(tensors), len(data))
	}
	hdr := map[string]any{}
	if len(metadata) > 0 {
		hdr["__metadata__"] = metadata
	}
	var pos int64
	for i, t := range tensors {
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		hdr[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []int64{pos, pos + int64(len(data[i]))}}
		pos += int64(len(data[i]))
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	for len(js)%8 != 0 { // the reference pads with spaces to 8 bytes
		js = append(js, ' ')
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(js)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	for _, d := range data {
		if _, err := w.Write(d); err != nil {
			return err
		}
	}
	return nil
}
