package hostmem

import (
	"bytes"
	"fmt"
	"os"
)

// MemInfo is the part of /proc/meminfo that concerns locked memory, in bytes.
type MemInfo struct {
	Total     uint64 `json:"mem_total_bytes"`     // MemTotal
	Available uint64 `json:"mem_available_bytes"` // MemAvailable: what can still be allocated without swapping
	Mlocked   uint64 `json:"mlocked_bytes"`       // Mlocked: memory locked by mlock, system-wide
}

// ReadMemInfo reads MemTotal, MemAvailable and Mlocked from /proc/meminfo.
func ReadMemInfo() (MemInfo, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return MemInfo{}, fmt.Errorf("hostmem: %w", err)
	}
	return parseMemInfo(b)
}

// parseMemInfo parses a /proc/meminfo text. MemTotal and MemAvailable are
// required; Mlocked is zero where the kernel does not report it.
func parseMemInfo(b []byte) (MemInfo, error) {
	var m MemInfo
	for _, f := range []struct {
		key      string
		dst      *uint64
		required bool
	}{
		{"MemTotal", &m.Total, true},
		{"MemAvailable", &m.Available, true},
		{"Mlocked", &m.Mlocked, false},
	} {
		kb, found, err := parseStatusKB(bytes.NewReader(b), f.key)
		if err != nil {
			return MemInfo{}, err
		}
		if !found && f.required {
			return MemInfo{}, fmt.Errorf("hostmem: /proc/meminfo has no %s line", f.key)
		}
		if kb > (1<<64-1)/1024 {
			return MemInfo{}, fmt.Errorf("hostmem: /proc/meminfo %s of %d kB overflows", f.key, kb)
		}
		*f.dst = kb * 1024
	}
	return m, nil
}
