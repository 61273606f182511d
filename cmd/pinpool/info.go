package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/pinpool/pinpool/internal/units"
	"io"
	"math"
	"text/tabwriter"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/hostmem"
)

// infoCmd is `pinpool info`.
type infoCmd struct {
	JSON bool `short:"j" help:"Print JSON instead of text."`
}

// infoReport is what `pinpool info` reports; it is also the --json schema.
type infoReport struct {
	Driver  *driverInfo       `json:"driver"`           // nil without a driver
	NoGPU   string            `json:"no_gpu,omitempty"` // why there is no GPU, when there is none
	Devices []cuda.Properties `json:"devices"`
	Host    hostInfo          `json:"host"`
}

type driverInfo struct {
	Release string `json:"release,omitempty"` // the driver's release, as nvidia-smi shows it: "580.159.04"
	Version int    `json:"version"`           // the CUDA version it supports: 1000*major + 10*minor
	CUDA    string `json:"cuda"`              // "13.0"
	Library string `json:"library"`
}

type hostInfo struct {
	hostmem.MemInfo
	MemlockSoft uint64 `json:"rlimit_memlock_soft_bytes"` // 18446744073709551615 = unlimited
	MemlockHard uint64 `json:"rlimit_memlock_hard_bytes"`
	ProcLocked  uint64 `json:"process_locked_bytes"` // VmLck of this process
	CapIPCLock  bool   `json:"cap_ipc_lock"`         // the limit does not bound this process
	// Cgroup is the memory limit of this process's cgroup (nil when it
	// could not be read: CgroupError says why).
	Cgroup      *hostmem.CgroupMemory `json:"cgroup,omitempty"`
	CgroupError string                `json:"cgroup_error,omitempty"`
}

func (c *infoCmd) Run(g *globals) error {
	r, err := gatherInfo()
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return r.writeText(g.stdout)
}

// gatherInfo asks the driver and the kernel. No driver is not an error: the
// report says why in NoGPU.
func gatherInfo() (*infoReport, error) {
	r := &infoReport{Devices: []cuda.Properties{}}
	if v, err := cuda.DriverVersion(); err != nil {
		if !cuda.IsNoDriver(err) {
			return nil, err
		}
		r.NoGPU = err.Error()
	} else {
		r.Driver = &driverInfo{Release: cuda.DriverRelease(), Version: v, CUDA: fmt.Sprintf("%d.%d", v/1000, v%1000/10), Library: cuda.LibraryPath()}
		n, err := cuda.DeviceCount()
		if err != nil {
			return nil, err
		}
		for i := range n {
			d, err := cuda.GetDevice(i)
			if err != nil {
				return nil, err
			}
			p, err := d.Properties()
			if err != nil {
				return nil, fmt.Errorf("device %d: %w", i, err)
			}
			r.Devices = append(r.Devices, p)
		}
	}
	var err error
	if r.Host.MemInfo, err = hostmem.ReadMemInfo(); err != nil {
		return nil, err
	}
	if r.Host.MemlockSoft, r.Host.MemlockHard, err = hostmem.LockLimit(); err != nil {
		return nil, err
	}
	if r.Host.ProcLocked, err = hostmem.LockedBytes(); err != nil {
		return nil, err
	}
	if r.Host.CapIPCLock, err = hostmem.CanLockBeyondLimit(); err != nil {
		return nil, err
	}
	if cg, err := hostmem.ReadCgroupMemory(); err != nil {
		r.Host.CgroupError = err.Error()
	} else {
		r.Host.Cgroup = &cg
	}
	return r, nil
}

// writeText prints the report as aligned text, every line within
// textwrap.Width characters.
func (r *infoReport) writeText(w io.Writer) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	if r.Driver == nil {
		fmt.Fprintf(tw, "gpu:\tnone: %s; pinpool uses its host backend (mlocked memory)\n", r.NoGPU)
	} else {
		release := r.Driver.Release
		if release == "" {
			release = "release unknown"
		}
		fmt.Fprintf(tw, "driver:\t%s, for CUDA %s (%d), %s\n", release, r.Driver.CUDA, r.Driver.Version, r.Driver.Library)
		if len(r.Devices) == 0 {
			fmt.Fprintln(tw, "devices:\tnone")
		}
	}
	for _, p := range r.Devices {
		numa := "not reported"
		if p.HostNUMAID >= 0 {
			numa = fmt.Sprint(p.HostNUMAID)
		}
		fmt.Fprintf(tw, "device %d:\t%s, compute %s, %s, %d SMs, PCI %s\n", p.Ordinal, p.Name, p.Compute(), units.Limit(p.TotalMem), p.MultiprocessorCount, p.PCIAddress())
		fmt.Fprintf(tw, "  integrated:\t%s\n", yesNo(p.Integrated))
		fmt.Fprintf(tw, "  can map host memory:\t%s\n", yesNo(p.CanMapHostMemory))
		fmt.Fprintf(tw, "  unified addressing:\t%s\n", yesNo(p.UnifiedAddressing))
		fmt.Fprintf(tw, "  host register:\t%s (read-only: %s)\n", yesNo(p.HostRegisterSupported), yesNo(p.ReadOnlyHostRegisterSupported))
		fmt.Fprintf(tw, "  pageable memory access:\t%s\n", yesNo(p.PageableMemoryAccess))
		fmt.Fprintf(tw, "  copy engines:\t%d\n", p.AsyncEngineCount)
		fmt.Fprintf(tw, "  host NUMA node:\t%s\n", numa)
	}
	h := r.Host
	fmt.Fprintf(tw, "host memory:\ttotal %s, available %s, locked system-wide (Mlocked) %s\n", units.Limit(h.Total), units.Limit(h.Available), units.Limit(h.Mlocked))
	fmt.Fprintf(tw, "RLIMIT_MEMLOCK:\tsoft %s, hard %s%s\n", units.Limit(h.MemlockSoft), units.Limit(h.MemlockHard), lockLimitNote(h))
	if !h.CapIPCLock && h.MemlockSoft != math.MaxUint64 {
		fmt.Fprintf(tw, "raise it with:\t%s\n", hostmem.LockLimitHint())
	}
	fmt.Fprintf(tw, "this process locked:\t%s\n", units.Limit(h.ProcLocked))
	fmt.Fprintf(tw, "cgroup:\t%s\n", cgroupLine(h.Cgroup, h.CgroupError))
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, wrapAligned(b.String()))
	return err
}

// cgroupLine describes the cgroup's memory limit for info and monitor,
// with what it means for pinned memory when there is one.
func cgroupLine(cg *hostmem.CgroupMemory, readErr string) string {
	switch {
	case cg == nil:
		return "unreadable: " + readErr
	case cg.Limit <= 0:
		return cg.String()
	}
	return cg.String() + "; pinned memory counts against it (pools stop growing short of it)"
}

// lockLimitNote says whether RLIMIT_MEMLOCK bounds the host backend here
// (the line after it says how to raise it).
func lockLimitNote(h hostInfo) string {
	switch {
	case h.CapIPCLock:
		return " (does not apply: this process has CAP_IPC_LOCK)"
	case h.MemlockSoft == math.MaxUint64:
		return ""
	}
	return "; without a GPU the pool locks at most this"
}
