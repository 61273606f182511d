package pinpool

import (
	"fmt"
	"unsafe"
)

// poisonWord fills released memory in Debug mode (0xDB in every byte).
const poisonWord = 0xDBDBDBDBDBDBDBDB

// poison fills a released buffer; sizes are whole pages, so whole words.
func poison(s *slot, size int64) {
	w := unsafe.Slice((*uint64)(s.ptr), size/8)
	for i := range w {
		w[i] = poisonWord
	}
}

// checkPoison panics when memory released in Debug mode was written after
// its release. The buffer goes back to the pool (poisoned again) first, so
// a recovered panic leaks nothing.
func checkPoison(s *slot, gen uint64, size int64) {
	w := unsafe.Slice((*uint64)(s.ptr), size/8)
	for i, v := range w {
		if v != poisonWord {
			s.chunk.class.release(s, gen)
			panic(fmt.Sprintf("pinpool: use after release: bytes %d..%d of a %d-byte buffer at %p were written after Release (Options.Debug)", i*8, i*8+7, size, s.ptr))
		}
	}
}
