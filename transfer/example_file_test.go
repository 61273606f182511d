package transfer_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/safetensors"
	"github.com/pinpool/pinpool/transfer"
)

// A safetensors file (the format PyTorch and Hugging Face store weights
// in) to the GPU: the header gives every tensor's byte range in the data
// section, the data section goes to one device allocation in one call,
// read in parallel straight into pinned memory (O_DIRECT where the page
// cache does not have it), and each tensor lies at its offset. It needs a
// GPU; without one it says so on standard error and returns.
func ExampleCopier_ToDeviceFromFile() {
	path := filepath.Join(os.TempDir(), "pinpool-example.safetensors")
	if err := writeExampleModel(path); err != nil {
		log.Fatal(err)
	}
	defer os.Remove(path)

	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		log.Fatal(err)
	}
	h, err := safetensors.ReadHeader(f, fi.Size())
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range h.Tensors {
		fmt.Println(t.Name, t.DType, t.Shape, t.Size())
	}

	b, err := cudahost.New(cudahost.Options{})
	if cuda.IsNoDriver(err) {
		fmt.Fprintln(os.Stderr, "no GPU: skipped:", cuda.NoGPUReason(err))
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	p, err := pinpool.New(pinpool.Options{Backend: pinpool.CUDABackend(b)})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	c, err := transfer.New(p, b.Context(), transfer.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	weights, err := b.Context().MemAlloc(int(h.DataSize))
	if err != nil {
		log.Fatal(err)
	}
	defer weights.Free()
	n, err := c.ToDeviceFromFile(context.Background(), weights.Ptr(), f, h.DataOffset, h.DataSize)
	if err != nil {
		log.Fatalf("%d of %d bytes arrived: %v", n, h.DataSize, err)
	}
	embed := weights.Ptr() + cuda.DevicePtr(h.Tensors[0].Begin) // each tensor at its offset
	_ = embed
	// Output:
	// embed F32 [1024 256] 1048576
	// norm BF16 [256] 512
}

// writeExampleModel writes a small safetensors file, as PyTorch's
// save_file would.
func writeExampleModel(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = safetensors.Write(f,
		[]safetensors.Tensor{{Name: "embed", DType: "F32", Shape: []int64{1024, 256}}, {Name: "norm", DType: "BF16", Shape: []int64{256}}},
		[][]byte{make([]byte, 1024*256*4), make([]byte, 256*2)}, map[string]string{"format": "pt"})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
