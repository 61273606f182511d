package safetensors_test

import (
	"bytes"
	"fmt"

	"github.com/pinpool/pinpool/safetensors"
)

// Write a file of two tensors, read its header back, and find where one
// tensor's bytes lie in the file.
func Example() {
	var f bytes.Buffer
	err := safetensors.Write(&f,
		[]safetensors.Tensor{{Name: "w", DType: "F32", Shape: []int64{2, 2}}, {Name: "b", DType: "F32", Shape: []int64{2}}},
		[][]byte{make([]byte, 16), {0, 0, 128, 63, 0, 0, 0, 64}}, map[string]string{"format": "pt"})
	if err != nil {
		panic(err)
	}
	h, err := safetensors.ReadHeader(bytes.NewReader(f.Bytes()), int64(f.Len()))
	if err != nil {
		panic(err)
	}
	off, n, err := h.FileRange("b", int64(f.Len()))
	if err != nil {
		panic(err)
	}
	fmt.Println(len(h.Tensors), "tensors; b is", n, "bytes at", off-h.DataOffset, "of the data section:", f.Bytes()[off:off+n])
	// A tensor whose data does not match its shape is refused before
	// anything is written.
	err = safetensors.Write(&bytes.Buffer{}, []safetensors.Tensor{{Name: "x", DType: "F32", Shape: []int64{3}}}, [][]byte{make([]byte, 4)}, nil)
	fmt.Println(err)
	// Output:
	// 2 tensors; b is 8 bytes at 16 of the data section: [0 0 128 63 0 0 0 64]
	// safetensors: invalid file: tensor "x": shape [3] of F32 needs 3 elements of 4 bytes, data_offsets [0, 4] hold 4 bytes
}
