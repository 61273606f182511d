// Package safetensors reads the header of a safetensors file, the format
// in which PyTorch, Hugging Face and others store model weights: an
// 8-byte little-endian header length, a JSON header that names every
// tensor with its dtype, shape and byte range, then the tensors' bytes.
// It reads no tensor data: a loader such as transfer.Copier's
// ToDeviceFromFile moves the data section (Header.DataOffset,
// Header.DataSize) to one device allocation, where each tensor lies at its
// Begin.
//
// ReadHeader and Write keep one set of rules: every file Write makes,
// ReadHeader accepts and returns as it was written, and Write refuses
// with ErrFormat whatever ReadHeader would refuse.
package safetensors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrFormat is wrapped by every error about a file that is not a valid
// safetensors file; the message says what is wrong.
var ErrFormat = errors.New("safetensors: invalid file")

// ErrNoTensor is returned by Header.FileRange for a name the header does
// not have.
var ErrNoTensor = errors.New("safetensors: no such tensor")

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
	Tensors    []Tensor          // by Begin (then End, then Name)
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

// FileRange returns where the named tensor's bytes lie in a file of
// fileSize bytes: n bytes from offset off. It checks the range against
// the header's data section and the file, with no arithmetic that can
// overflow, so a header made or changed by hand cannot send a reader past
// the file: a range outside them is ErrFormat, an unknown name
// ErrNoTensor.
func (h *Header) FileRange(name string, fileSize int64) (off, n int64, err error) {
	t, ok := h.Tensor(name)
	if !ok {
		return 0, 0, fmt.Errorf("%w: %q", ErrNoTensor, name)
	}
	if t.Begin < 0 || t.End < t.Begin || t.End > h.DataSize || h.DataOffset < 0 || h.DataSize < 0 ||
		fileSize < h.DataOffset || h.DataSize > fileSize-h.DataOffset {
		return 0, 0, fmt.Errorf("%w: tensor %q at [%d, %d) of a data section of %d bytes at %d does not lie in a file of %d bytes",
			ErrFormat, name, t.Begin, t.End, h.DataSize, h.DataOffset, fileSize)
	}
	return h.DataOffset + t.Begin, t.End - t.Begin, nil
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
// A read that fills its buffer counts as complete even when r reports
// io.EOF with it, as io.ReaderAt allows.
func ReadHeader(r io.ReaderAt, size int64) (*Header, error) {
	if size < 8 {
		return nil, fmt.Errorf("%w: a file of %d bytes has no room for the header's length", ErrFormat, size)
	}
	var lenBuf [8]byte
	if err := readFullAt(r, lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("%w: reading the header's length: %w", ErrFormat, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize || n > uint64(size-8) {
		return nil, fmt.Errorf("%w: header of %d bytes in a file of %d", ErrFormat, n, size)
	}
	js := make([]byte, n)
	if err := readFullAt(r, js, 8); err != nil {
		return nil, fmt.Errorf("%w: reading the header: %w", ErrFormat, err)
	}
	h, err := ParseHeader(js)
	if err != nil {
		return nil, err
	}
	h.DataOffset = 8 + int64(n)
	if h.DataSize > size-h.DataOffset { // not DataOffset+DataSize > size: that sum can overflow
		return nil, fmt.Errorf("%w: data section of %d bytes at %d runs past the end of the file (%d bytes)", ErrFormat, h.DataSize, h.DataOffset, size)
	}
	return h, nil
}

// readFullAt fills p from off. It trusts no count r returns: a count
// other than len(p) is an error whatever r says with it, and io.EOF with
// a full buffer is success.
func readFullAt(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	switch {
	case n == len(p) && (err == nil || err == io.EOF):
		return nil
	case n < 0 || n > len(p):
		return fmt.Errorf("the reader returned a count of %d for %d bytes", n, len(p))
	case err == nil || err == io.EOF:
		return fmt.Errorf("%d of %d bytes: %w", n, len(p), io.ErrUnexpectedEOF)
	}
	return err
}
