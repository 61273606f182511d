//go:build !amd64

package transfer

// streamBytes copies src into dst (of equal length); only amd64 has the non-temporal version,
// elsewhere it is a plain copy.
func streamBytes(dst, src []byte) { copy(dst, src) }

// evictBytes does nothing where there is no CLFLUSHOPT binding.
func evictBytes(b []byte) {}

// evictAvailable reports whether evictBytes evicts anything.
func evictAvailable() bool { return false }

// demoteBytes does nothing where there is no CLDEMOTE binding.
func demoteBytes(b []byte) {}
