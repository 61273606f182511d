package pinpool

import "github.com/pinpool/pinpool/hostmem"

func lockedBytes() (int64, error) {
	n, err := hostmem.LockedBytes()
	return int64(n), err
}

func hostOpts() hostmem.Options { return hostmem.Options{} }
