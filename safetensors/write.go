package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"unicode/utf8"
)

// Write writes a safetensors file of the tensors, whose bytes data gives
// in the order of tensors (each Tensor's Begin and End are set from it),
// with the metadata, if any. It refuses with ErrFormat, before writing
// anything, a file that ReadHeader would refuse: a data slice of another
// length than the tensor's shape and dtype need, an unknown dtype, a
// negative or overflowing shape, two tensors of one name, a tensor named
// "__metadata__", a name or metadata that is not valid UTF-8, a header
// over MaxHeaderSize. PyTorch's save_file writes the same format.
func Write(w io.Writer, tensors []Tensor, data [][]byte, metadata map[string]string) error {
	js, err := headerJSON(tensors, data, metadata)
	if err != nil {
		return err
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(js)))
	if err := writeAll(w, lenBuf[:]); err != nil {
		return err
	}
	if err := writeAll(w, js); err != nil {
		return err
	}
	for _, d := range data {
		if err := writeAll(w, d); err != nil {
			return err
		}
	}
	return nil
}

// headerJSON checks the tensors by the rules ParseHeader applies and
// returns the header, padded with spaces to a multiple of 8 bytes as the
// reference implementation pads it.
func headerJSON(tensors []Tensor, data [][]byte, metadata map[string]string) ([]byte, error) {
	if len(tensors) != len(data) {
		return nil, fmt.Errorf("%w: %d tensors, %d data", ErrFormat, len(tensors), len(data))
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("%w: __metadata__: %q: %q is not valid UTF-8", ErrFormat, k, v)
		}
	}
	type entry struct {
		DType   string   `json:"dtype"`
		Shape   []int64  `json:"shape"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	hdr := make(map[string]any, len(tensors)+1)
	if len(metadata) > 0 {
		hdr[metadataKey] = metadata
	}
	var pos int64
	for i, t := range tensors {
		n := int64(len(data[i]))
		if n > math.MaxInt64-pos {
			return nil, fmt.Errorf("%w: tensor %q: the data section passes 2^63 bytes", ErrFormat, t.Name)
		}
		checked, err := tensorOf(t.Name, t.DType, t.Shape, pos, pos+n)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrFormat, err)
		}
		if _, dup := hdr[t.Name]; dup {
			return nil, fmt.Errorf("%w: tensor %q named twice", ErrFormat, t.Name)
		}
		hdr[t.Name] = entry{DType: t.DType, Shape: checked.Shape, Offsets: [2]int64{pos, pos + n}}
		pos += n
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	if len(js) > MaxHeaderSize {
		return nil, fmt.Errorf("%w: a header of %d bytes, more than MaxHeaderSize", ErrFormat, len(js))
	}
	return js, nil
}

// writeAll writes p to w and treats a count short of len(p) with no error
// as io.ErrShortWrite, as io.Writer's contract says it must not happen.
func writeAll(w io.Writer, p []byte) error {
	n, err := w.Write(p)
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	return err
}
