package pinpool

import (
	"fmt"
	"testing"
)

// TestLargeBufferWaste checks that without Exact a single buffer of 1 GiB
// or more costs at most 1% more than asked, in its capacity and in the
// memory the pool holds for it. The backend maps without touching, so the
// test locks no memory.
func TestLargeBufferWaste(t *testing.T) {
	for _, n := range []int{1<<30 + 1, 2233382994, 5<<30 + 12345, 17<<30 - 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := newFake()
			f.inner = nil // plain mappings, never touched, whatever the suite's backend
			p, _ := newTestPool(t, Options{Backend: f, IdleDecay: -1, IdleTimeout: -1})
			b := mustGet(t, p, n)
			defer b.Release()
			limit := int64(n) + int64(n)/100
			if int64(b.Cap()) > limit {
				t.Errorf("capacity %d for %d bytes: more than 1%% over", b.Cap(), n)
			}
			if h := p.Stats().BytesHeld; h > limit {
				t.Errorf("the pool holds %d bytes for one buffer of %d: more than 1%% over", h, n)
			}
		})
	}
}
