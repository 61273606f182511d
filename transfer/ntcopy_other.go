//go:build !amd64

package transfer

// Only amd64 has the non-temporal copy, the eviction and the demotion: elsewhere streamBytes is a
// plain copy and the others do nothing.
func streamBytes(dst, src []byte) { copy(dst, src) }
func evictBytes(b []byte)         {}
func demoteBytes(b []byte)        {}

// canEvict reports whether evictBytes evicts anything.
const canEvict = false
