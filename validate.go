package pinpool

import (
	"fmt"
	"reflect"
	"time"

	"github.com/pinpool/pinpool/hostmem"
)

// Limits of the options.
const (
	maxSlabSize    = 1 << 30
	maxSlabMax     = maxSlabSize / 2
	minIdleTimeout = time.Millisecond
)

// validate checks every field of the options and returns them with the
// defaults filled in, and MemTotal (0 when unknown). A bad field or a
// contradiction is an error wrapping ErrInvalidOptions that names it; no
// value is silently rewritten.
func (o Options) validate() (Options, int64, error) {
	bad := func(field string, value any, want string) (Options, int64, error) {
		return Options{}, 0, fmt.Errorf("%w: %s = %v: %s", ErrInvalidOptions, field, value, want)
	}
	if o.Backend != nil {
		if v := reflect.ValueOf(o.Backend); v.Kind() == reflect.Pointer && v.IsNil() {
			return bad("Backend", fmt.Sprintf("%T(nil)", o.Backend), "want a backend, or nil for the default")
		}
	}
	if o.Budget < 0 || (o.Budget > 0 && o.Budget < pageSize) {
		return bad("Budget", o.Budget, fmt.Sprintf("want 0 (no cap) or at least %d bytes", pageSize))
	}
	if o.GrowCount < 0 {
		return bad("GrowCount", o.GrowCount, "want 0 (default 4) or more")
	}
	if o.GrowBytes < 0 {
		return bad("GrowBytes", o.GrowBytes, "want 0 (default 64 MiB) or more")
	}
	if o.SlabMax > maxSlabMax {
		return bad("SlabMax", o.SlabMax, fmt.Sprintf("want at most %d (negative: no slabs)", maxSlabMax))
	}
	if o.SlabSize < 0 || o.SlabSize > maxSlabSize || o.SlabSize%pageSize != 0 {
		return bad("SlabSize", o.SlabSize, fmt.Sprintf("want 0 (default) or a multiple of %d up to %d", pageSize, maxSlabSize))
	}
	if o.IdleTimeout > 0 && o.IdleTimeout < minIdleTimeout {
		return bad("IdleTimeout", o.IdleTimeout, fmt.Sprintf("want 0 (default %v), negative (never) or at least %v", DefaultIdleTimeout, minIdleTimeout))
	}
	if o.IdleDecay > 0 && o.IdleDecay < minIdleTimeout {
		return bad("IdleDecay", o.IdleDecay, fmt.Sprintf("want 0 (default %v), negative (never) or at least %v", DefaultIdleDecay, minIdleTimeout))
	}
	if o.SlabMax > 0 && o.SlabSize > 0 && o.SlabSize < 2*o.SlabMax {
		return bad("SlabSize", o.SlabSize, fmt.Sprintf("holds fewer than 2 buffers of SlabMax = %d", o.SlabMax))
	}
	if o.Budget > 0 && o.SlabSize > 0 && int64(o.SlabSize) > o.Budget {
		return bad("SlabSize", o.SlabSize, fmt.Sprintf("larger than Budget = %d: no slab could be allocated", o.Budget))
	}
	var memTotal int64
	if mi, err := hostmem.ReadMemInfo(); err == nil {
		memTotal = int64(mi.Total)
	}
	if o.MinAvailable > 0 && memTotal > 0 && o.MinAvailable >= memTotal {
		return bad("MinAvailable", o.MinAvailable, fmt.Sprintf("at least MemTotal (%d bytes): the pool could never grow", memTotal))
	}

	if o.GrowCount == 0 {
		o.GrowCount = DefaultGrowCount
	}
	if o.GrowBytes == 0 {
		o.GrowBytes = DefaultGrowBytes
	}
	if o.SlabMax == 0 {
		o.SlabMax = DefaultSlabMax
	}
	if o.SlabSize == 0 {
		o.SlabSize = DefaultSlabSize
		if o.SlabMax > 0 && o.SlabSize < 4*o.SlabMax {
			o.SlabSize = int(min(pageRound(4*int64(o.SlabMax)), maxSlabSize))
		}
	}
	if o.MaxIdle == 0 {
		o.MaxIdle = DefaultMaxIdle
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.IdleDecay == 0 {
		o.IdleDecay = DefaultIdleDecay
	}
	if o.CloseWait == 0 {
		o.CloseWait = DefaultCloseWait
	}
	return o, memTotal, nil
}
