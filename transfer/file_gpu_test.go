package transfer

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/safetensors"
)

// TestGPUFileRoundTrip sends a file (at an odd offset, cold and then from
// the page cache) and a reader to the device, checks the device bytes by
// the checksum kernel, and writes them back to a file and a writer.
func TestGPUFileRoundTrip(t *testing.T) {
	g := newGPU(t, cudahost.Options{})
	c := g.copier(t, Options{})
	const n = 64<<20 + 4097
	data := randomBytes(n+333, 11)
	f := writeTemp(t, data)
	dropCache(t, f, 0, 0)
	d := g.devMem(t, n)
	for _, pass := range []string{"cold", "warm"} {
		if got, err := c.ToDeviceFromFile(context.Background(), d.Ptr(), f, 333, n); err != nil || got != n {
			t.Fatalf("%s: ToDeviceFromFile: %d, %v", pass, got, err)
		}
		g.checkDevice(t, pass+" file", d.Ptr(), data[333:])
	}
	out := writeTemp(t, nil)
	if got, err := c.FromDeviceToFile(context.Background(), out, 0, d.Ptr(), n); err != nil || got != n {
		t.Fatalf("FromDeviceToFile: %d, %v", got, err)
	}
	back, _ := os.ReadFile(out.Name())
	if !bytes.Equal(back, data[333:]) {
		t.Fatal("file written from the device differs")
	}
	if got, err := c.ToDeviceFrom(context.Background(), d.Ptr(), bytes.NewReader(data), n); err != nil || got != n {
		t.Fatalf("ToDeviceFrom: %d, %v", got, err)
	}
	g.checkDevice(t, "reader", d.Ptr(), data[:n])
	var w bytes.Buffer
	if got, err := c.FromDeviceTo(context.Background(), &w, d.Ptr(), n); err != nil || got != n || !bytes.Equal(w.Bytes(), data[:n]) {
		t.Fatalf("FromDeviceTo: %d, %v (or bytes differ)", got, err)
	}
}

// TestGPUFileWindowBound moves a 64 GiB (sparse) file to the device
// through the default 32 MiB windows, reading Stats all along: the staging
// held and the pool's memory in use never exceed the two windows (the
// load borrows the idle download window's slots: move).
func TestGPUFileWindowBound(t *testing.T) {
	g := newGPU(t, cudahost.Options{})
	c := g.copier(t, Options{})
	n := int64(64 << 30)
	if free, _, err := g.ctx.MemGetInfo(); err != nil || free < uint64(n)+(1<<30) {
		n = 4 << 30
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(n); err != nil {
		t.Fatal(err)
	}
	d := g.devMem(t, int(n))
	stop := samplePeak(func() int64 { return g.pool.Stats().BytesInUse })
	got, err := c.ToDeviceFromFile(context.Background(), d.Ptr(), f, 0, n)
	peak, samples := stop()
	if err != nil || got != n {
		t.Fatalf("%d bytes, %v", got, err)
	}
	st := c.Stats()
	win := c.Options().WindowBytes
	// The copier's count is exact. The pool's Stats scans its slots one by
	// one while the lanes run, so a buffer given back and another taken
	// during one scan can both count as in use: allow one such handover a
	// reading lane (one in all was too few on the GPU host).
	if st.PeakStaging > 2*win || peak > 2*win+int64(c.fileReaders()*c.Options().ChunkSize) {
		t.Fatalf("staging peak %d, pool in use peak %d, windows of %d", st.PeakStaging, peak, win)
	}
	t.Logf("%d GiB file through a %d MiB window: staging peak %d MiB, pool in use peak %d MiB (%d samples)", n>>30, win>>20, st.PeakStaging>>20, peak>>20, samples)
}

// TestGPUSafetensorsPeer loads a safetensors file that PyTorch wrote
// ($PINPOOL_SAFETENSORS) into one device allocation, and checks every
// tensor by the checksum kernel against the checksums PyTorch computed on
// its own load of the file ($PINPOOL_SAFETENSORS_SUMS, JSON name →
// decimal checksum; scripts/ref/safetensors_peer.py). Then it writes the
// device memory back as a safetensors file ($PINPOOL_SAFETENSORS_OUT),
// which the script loads with PyTorch and checks.
func TestGPUSafetensorsPeer(t *testing.T) {
	path, sumsPath := os.Getenv("PINPOOL_SAFETENSORS"), os.Getenv("PINPOOL_SAFETENSORS_SUMS")
	if path == "" || sumsPath == "" {
		t.Skip("PINPOOL_SAFETENSORS and PINPOOL_SAFETENSORS_SUMS not set: scripts/gpu-run.sh sets them on the GPU host")
	}
	g := newGPU(t, cudahost.Options{})
	c := g.copier(t, Options{})
	var sums map[string]string
	js, err := os.ReadFile(sumsPath)
	if err == nil {
		err = json.Unmarshal(js, &sums)
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	h, err := safetensors.ReadHeader(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	d := g.devMem(t, int(h.DataSize))
	if got, err := c.ToDeviceFromFile(context.Background(), d.Ptr(), f, h.DataOffset, h.DataSize); err != nil || got != h.DataSize {
		t.Fatalf("loading %s: %d bytes, %v", path, got, err)
	}
	if len(sums) != len(h.Tensors) {
		t.Fatalf("%d tensors in the file, %d checksums from PyTorch", len(h.Tensors), len(sums))
	}
	for _, tn := range h.Tensors {
		got, err := g.k.Checksum(g.s, d.Ptr()+cuda.DevicePtr(tn.Begin), int(tn.Size()))
		if err != nil {
			t.Fatal(err)
		}
		want, err := strconv.ParseUint(sums[tn.Name], 10, 64)
		if err != nil {
			t.Fatalf("checksum of %q: %v", tn.Name, err)
		}
		if got != want {
			t.Errorf("tensor %q (%s %v): device checksum %d, PyTorch's %d", tn.Name, tn.DType, tn.Shape, got, want)
		}
	}
	t.Logf("%s: %d tensors, %d MiB, every checksum equal to PyTorch's", filepath.Base(path), len(h.Tensors), h.DataSize>>20)
	if outPath := os.Getenv("PINPOOL_SAFETENSORS_OUT"); outPath != "" {
		out, err := os.Create(outPath)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		if _, err := io.Copy(out, io.NewSectionReader(f, 0, h.DataOffset)); err != nil { // the header as it was
			t.Fatal(err)
		}
		if got, err := c.FromDeviceToFile(context.Background(), out, h.DataOffset, d.Ptr(), h.DataSize); err != nil || got != h.DataSize {
			t.Fatalf("writing %s: %d, %v", outPath, got, err)
		}
		if err := out.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}
