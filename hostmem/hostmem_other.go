//go:build !linux

package hostmem

// Map returns ErrUnsupported: the real implementation is Linux only.
func Map(size int, opt Options) (*Region, error) { return nil, ErrUnsupported }

// Alloc returns ErrUnsupported: the real implementation is Linux only.
func Alloc(size int, opt Options) (*Region, error) { return nil, ErrUnsupported }

// LockLimit returns ErrUnsupported: the real implementation is Linux only.
func LockLimit() (soft, hard uint64, err error) { return 0, 0, ErrUnsupported }

// LockedBytes returns ErrUnsupported: the real implementation is Linux only.
func LockedBytes() (uint64, error) { return 0, ErrUnsupported }

// release is never reached: no Region is made on this system.
func (r *Region) release() error { return ErrUnsupported }

// CanLockBeyondLimit returns ErrUnsupported: the real implementation is Linux only.
func CanLockBeyondLimit() (bool, error) { return false, ErrUnsupported }

// LockAllowance returns ErrUnsupported: the real implementation is Linux only.
func LockAllowance() (bytes uint64, limited bool, err error) { return 0, false, ErrUnsupported }

// RaiseLockLimitHint is the command that lifts RLIMIT_MEMLOCK (Linux only).
const RaiseLockLimitHint = "`ulimit -l unlimited`"

// LockLimitHint is RaiseLockLimitHint (Linux only).
func LockLimitHint() string { return RaiseLockLimitHint }

// MapLazy returns ErrUnsupported: the real implementation is Linux only.
func MapLazy(size int, opt Options) (*Region, error) { return nil, ErrUnsupported }

// Prefault returns ErrUnsupported: the real implementation is Linux only.
func (r *Region) Prefault(off, n int) error { return ErrUnsupported }

// Discard returns ErrUnsupported: the real implementation is Linux only.
func (r *Region) Discard(off, n int) error { return ErrUnsupported }

// HugeTLB is false: the real implementation is Linux only.
func (r *Region) HugeTLB() bool { return false }

// HugePageBytes returns ErrUnsupported: the real implementation is Linux only.
func (r *Region) HugePageBytes() (int64, error) { return 0, ErrUnsupported }

// CheckNode returns ErrUnsupported: the real implementation is Linux only.
func (r *Region) CheckNode() error { return ErrUnsupported }
