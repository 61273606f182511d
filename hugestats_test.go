package pinpool

import (
	"testing"

	"github.com/pinpool/pinpool/hostmem"
)

// hugeAlloc is an allocation that reports half of it backed by huge pages.
type hugeAlloc struct{ Allocation }

func (a hugeAlloc) HugePageBytes() int64 { return int64(len(a.Bytes())) / 2 }

type hugeBackend struct{ *fakeBackend }

func (b hugeBackend) Alloc(size int) (Allocation, error) {
	a, err := b.fakeBackend.Alloc(size)
	if err != nil {
		return nil, err
	}
	return hugeAlloc{a}, nil
}

func (b hugeBackend) SplitRetries() uint64 { return 3 }

// TestStatsHugePages checks that Stats adds up what the allocations say
// of their huge pages, and reports the backend's split retries.
func TestStatsHugePages(t *testing.T) {
	f := newFake()
	p, _ := newTestPool(t, Options{Backend: hugeBackend{f}, IdleDecay: -1, IdleTimeout: -1})
	if err := p.Reserve(8<<20, 4); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.BytesHugePages != st.BytesHeld/2 || st.PinSplits != 3 {
		t.Fatalf("BytesHugePages %d of %d held, PinSplits %d; want half and 3", st.BytesHugePages, st.BytesHeld, st.PinSplits)
	}
	p.Trim()
	if st := p.Stats(); st.BytesHugePages != 0 {
		t.Fatalf("after Trim BytesHugePages = %d", st.BytesHugePages)
	}
}

// TestHostBackendHugePages checks the host backend's report on real
// memory: within what the pool holds, and 0 without huge pages.
func TestHostBackendHugePages(t *testing.T) {
	for _, huge := range []bool{false, true} {
		p, err := New(Options{Backend: NewHostBackend(hostmem.Options{HugePages: huge}), MinAvailable: -1})
		if err != nil {
			t.Fatal(err)
		}
		b, err := p.TryGet(4 << 20)
		if err != nil {
			p.Close()
			t.Skipf("no 4 MiB of locked memory here: %v", err)
		}
		st := p.Stats()
		if st.BytesHugePages < 0 || st.BytesHugePages > st.BytesHeld || !huge && st.BytesHugePages != 0 {
			t.Errorf("HugePages %v: BytesHugePages %d of %d held", huge, st.BytesHugePages, st.BytesHeld)
		}
		b.Release()
		p.Close()
	}
}
