//go:build !linux

package multigpu

import "runtime"

// ReadHost returns the host's NUMA layout where the system shows it (Linux
// only); here it is unknown: Nodes is nil and CPUs is runtime.NumCPU(), so
// placement binds nothing and shares every CPU among all devices.
func ReadHost() Host { return Host{CPUs: runtime.NumCPU()} }
