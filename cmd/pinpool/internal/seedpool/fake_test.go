package seedpool

import (
	"errors"
	"testing"
	"time"
)

func TestFakeAllocator(t *testing.T) {
	var fa FakeAllocator // the zero value is ready
	b, err := fa.Alloc(100)
	if err != nil || len(b) != 100 {
		t.Fatalf("Alloc = len %d, %v", len(b), err)
	}
	c, _ := fa.Alloc(50)
	if fa.LiveBytes() != 150 || fa.LiveBlocks() != 2 {
		t.Fatalf("live %d bytes in %d blocks", fa.LiveBytes(), fa.LiveBlocks())
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"nil", nil, ErrUnknown},
		{"foreign", make([]byte, 100), ErrUnknown},
		{"interior", b[1:], ErrUnknown},
	} {
		if err := fa.Free(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: Free = %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := fa.Free(b[:0]); err != nil { // resliced from the start: fine
		t.Fatal(err)
	}
	if err := fa.Free(b); !errors.Is(err, ErrDoubleFree) {
		t.Fatalf("double Free = %v, want ErrDoubleFree", err)
	}
	if err := fa.Free(c); err != nil {
		t.Fatal(err)
	}
	if fa.LiveBytes() != 0 || fa.LiveBlocks() != 0 {
		t.Fatalf("live %d bytes in %d blocks", fa.LiveBytes(), fa.LiveBlocks())
	}
	if fa.AllocCalls() != 2 || fa.FreeCalls() != 6 {
		t.Fatalf("calls %d/%d, want 2/6", fa.AllocCalls(), fa.FreeCalls())
	}
	if _, err := fa.Alloc(0); !errors.Is(err, ErrInvalidSize) {
		t.Fatalf("Alloc(0) = %v", err)
	}
}

func TestFakeAllocatorFailEvery(t *testing.T) {
	fa := &FakeAllocator{FailEvery: 3}
	var failed []int
	for i := 1; i <= 9; i++ {
		if _, err := fa.Alloc(8); err != nil {
			if !errors.Is(err, ErrInjected) {
				t.Fatal(err)
			}
			failed = append(failed, i)
		}
	}
	if len(failed) != 3 || failed[0] != 3 || failed[1] != 6 || failed[2] != 9 {
		t.Fatalf("failed calls %v, want [3 6 9]", failed)
	}
	if fa.Failures() != 3 || fa.LiveBlocks() != 6 || fa.LiveBytes() != 48 {
		t.Fatalf("failures %d, live %d blocks %d bytes", fa.Failures(), fa.LiveBlocks(), fa.LiveBytes())
	}
}

func TestFakeAllocatorLatency(t *testing.T) {
	fa := &FakeAllocator{Latency: 2 * time.Millisecond}
	t0 := time.Now()
	b, err := fa.Alloc(1)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < fa.Latency {
		t.Fatalf("Alloc took %v, want >= %v", d, fa.Latency)
	}
	if err := fa.Free(b); err != nil {
		t.Fatal(err)
	}
}

func TestFuncAllocator(t *testing.T) {
	var fa FakeAllocator
	var asked []int
	f := NewFuncAllocator(func(n int) ([]byte, func() error, error) {
		asked = append(asked, n)
		b, err := fa.Alloc(n)
		if err != nil {
			return nil, nil, err
		}
		return b, func() error { return fa.Free(b) }, nil
	}, 4096)
	b, err := f.Alloc(FrameSize)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != FrameSize || cap(b) != FrameSize {
		t.Fatalf("len %d cap %d, want %d", len(b), cap(b), FrameSize)
	}
	if want := (FrameSize + 4095) / 4096 * 4096; asked[0] != want {
		t.Fatalf("asked %d, want %d", asked[0], want)
	}
	if f.Live() != 1 {
		t.Fatalf("Live = %d", f.Live())
	}
	if err := f.Free(make([]byte, 1)); !errors.Is(err, ErrUnknown) {
		t.Fatalf("foreign Free = %v", err)
	}
	if err := f.Free(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Free(b); !errors.Is(err, ErrUnknown) {
		t.Fatalf("second Free = %v", err)
	}
	if f.Live() != 0 || fa.LiveBytes() != 0 {
		t.Fatalf("leak: %d, %d", f.Live(), fa.LiveBytes())
	}
	// The seed pool runs over it.
	p := New(f, Options{})
	x := mustAlloc(t, p, FrameSize)
	mustFree(t, p, FrameSize, x)
	if err := p.Destroy(); err != nil {
		t.Fatal(err)
	}
	if f.Live() != 0 || fa.LiveBytes() != 0 {
		t.Fatalf("leak after pool: %d, %d", f.Live(), fa.LiveBytes())
	}
}

type testChunk struct {
	b     []byte
	freed *int
}

func (c testChunk) Bytes() []byte { return c.b }
func (c testChunk) Free() error   { *c.freed++; return nil }

// TestChunkAllocator checks that sizes are asked in whole pages, the slice
// handed out has the size asked, and Free reaches the chunk.
func TestChunkAllocator(t *testing.T) {
	var asked []int
	freed := 0
	a := ChunkAllocator(func(n int) (testChunk, error) {
		asked = append(asked, n)
		return testChunk{make([]byte, n), &freed}, nil
	})
	b, err := a.Alloc(5000)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 5000 || len(asked) != 1 || asked[0] != 8192 {
		t.Fatalf("got %d bytes, asked %v", len(b), asked)
	}
	if err := a.Free(b); err != nil || freed != 1 {
		t.Fatalf("Free: %v, %d chunks freed", err, freed)
	}
}
