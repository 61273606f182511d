package cuda_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
)

// TestGPUForeignStreamAndEvent: a stream and an event made through the
// raw driver API, as another library would make them, carry a pool
// buffer's copy and fence its release; the wrappers' Destroy leaves both
// handles alive for their owner, who destroys them.
func TestGPUForeignStreamAndEvent(t *testing.T) {
	b, err := cudahost.New(cudahost.Options{})
	if cuda.IsNoDriver(err) {
		t.Skipf("GPU test skipped: no CUDA driver or device (%v)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	gpu := b.Context()
	hs, err := cuda.RawStreamCreate(gpu)
	if err != nil {
		t.Fatal(err)
	}
	he, err := cuda.RawEventCreate(gpu)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pinpool.New(pinpool.Options{Backend: pinpool.CUDABackend(b)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1920 * 1080 * 3 / 2
	dev, err := gpu.MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free()

	stream := gpu.WrapStream(hs)
	ev, err := gpu.WrapEvent(he)
	if err != nil {
		t.Fatal(err)
	}
	var _ pinpool.Fence = ev
	ctx := context.Background()
	buf, err := p.Get(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range buf.Bytes() {
		buf.Bytes()[i] = byte(i*7 + 1)
	}
	want := bytes.Clone(buf.Bytes())
	if err := stream.CopyHtoDAsync(dev.Ptr(), buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := ev.Record(stream); err != nil {
		t.Fatal(err)
	}
	if err := buf.ReleaseAfter(ev); err != nil {
		t.Fatal(err)
	}
	back, err := p.Get(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	clear(back.Bytes())
	if err := stream.CopyDtoHAsync(back.Bytes(), dev.Ptr()); err != nil {
		t.Fatal(err)
	}
	if err := stream.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Bytes(), want) {
		t.Fatal("the copy on the foreign stream changed the data")
	}
	back.Release()
	for deadline := time.Now().Add(10 * time.Second); p.Stats().BytesPending > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a buffer released after a completed foreign event is still pending: %+v", p.Stats())
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	if err := stream.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := ev.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := cuda.RawStreamQuery(gpu, hs); err != nil {
		t.Fatalf("the foreign stream after the wrapper's Destroy: %v", err)
	}
	if err := cuda.RawEventQuery(gpu, he); err != nil {
		t.Fatalf("the foreign event after the wrapper's Destroy: %v", err)
	}
	if err := cuda.RawEventDestroy(gpu, he); err != nil {
		t.Fatalf("its owner destroys the event: %v", err)
	}
	if err := cuda.RawStreamDestroy(gpu, hs); err != nil {
		t.Fatalf("its owner destroys the stream: %v", err)
	}
}
