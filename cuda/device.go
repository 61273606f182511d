package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"unsafe"
)

// DriverVersion returns the CUDA version the driver supports, encoded as
// 1000*major + 10*minor (13000 for CUDA 13.0).
func DriverVersion() (int, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	var v int32
	if r := invoke(fn.cuDriverGetVersion, uintptr(unsafe.Pointer(&v))); r != Success {
		return 0, resultErr("cuDriverGetVersion", r)
	}
	return int(v), nil
}

// DeviceCount returns the number of CUDA devices the driver sees.
func DeviceCount() (int, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	var n int32
	if r := invoke(fn.cuDeviceGetCount, uintptr(unsafe.Pointer(&n))); r != Success {
		return 0, resultErr("cuDeviceGetCount", r)
	}
	return int(n), nil
}

// Device is a CUDA device by ordinal. Its methods need no context.
//
// A Device must come from GetDevice (or Context.Device). The methods of any
// other Device, such as the zero value that a failed GetDevice returns,
// return an error instead of calling the driver: one wrapping ErrNoDriver
// without a driver, else one matching ErrInvalidDevice.
type Device struct {
	ordinal int
	handle  int32 // CUdevice
	valid   bool  // made by GetDevice
}

// GetDevice returns the device with the given ordinal (0 is the first).
func GetDevice(ordinal int) (Device, error) {
	if err := Load(); err != nil {
		return Device{}, err
	}
	if ordinal < 0 || ordinal > 1<<20 {
		return Device{}, fmt.Errorf("%w: device ordinal %d", ErrInvalidDevice, ordinal)
	}
	var h int32
	if r := invoke(fn.cuDeviceGet, uintptr(unsafe.Pointer(&h)), uintptr(ordinal)); r != Success {
		return Device{}, resultErr("cuDeviceGet", r)
	}
	return Device{ordinal: ordinal, handle: h, valid: true}, nil
}

// Ordinal is the device's index as passed to GetDevice.
func (d Device) Ordinal() int { return d.ordinal }

// usable returns nil for a Device from GetDevice, else the error that op on
// it returns.
func (d Device) usable(op string) error {
	if err := Load(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if !d.valid {
		return fmt.Errorf("%w: %s on a Device that GetDevice did not return", ErrInvalidDevice, op)
	}
	return nil
}

// Name is the device's product name, e.g. "NVIDIA H200".
func (d Device) Name() (string, error) {
	if err := d.usable("cuDeviceGetName"); err != nil {
		return "", err
	}
	var buf [256]byte
	if r := invoke(fn.cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(d.handle)); r != Success {
		return "", resultErr("cuDeviceGetName", r)
	}
	if i := bytes.IndexByte(buf[:], 0); i >= 0 {
		return string(buf[:i]), nil
	}
	return string(buf[:]), nil
}

// TotalMem is the device's memory in bytes.
func (d Device) TotalMem() (uint64, error) {
	if err := d.usable("cuDeviceTotalMem"); err != nil {
		return 0, err
	}
	var n uint64
	if r := invoke(fn.cuDeviceTotalMem, uintptr(unsafe.Pointer(&n)), uintptr(d.handle)); r != Success {
		return 0, resultErr("cuDeviceTotalMem", r)
	}
	return n, nil
}

// Attribute is a CUdevice_attribute.
type Attribute int32

// Device attributes this project reads (values from cuda.h).
const (
	AttrMultiprocessorCount            Attribute = 16
	AttrIntegrated                     Attribute = 18
	AttrCanMapHostMemory               Attribute = 19
	AttrPCIBusID                       Attribute = 33
	AttrPCIDeviceID                    Attribute = 34
	AttrAsyncEngineCount               Attribute = 40
	AttrUnifiedAddressing              Attribute = 41
	AttrPCIDomainID                    Attribute = 50
	AttrComputeCapabilityMajor         Attribute = 75
	AttrComputeCapabilityMinor         Attribute = 76
	AttrPageableMemoryAccess           Attribute = 88
	AttrCanUseHostPointerForRegistered Attribute = 91
	AttrHostRegisterSupported          Attribute = 99
	AttrReadOnlyHostRegisterSupported  Attribute = 113
	AttrHostNUMAID                     Attribute = 134
)

// Attribute returns the value of a device attribute.
func (d Device) Attribute(a Attribute) (int, error) {
	if err := d.usable("cuDeviceGetAttribute"); err != nil {
		return 0, err
	}
	var v int32
	if r := invoke(fn.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(d.handle)); r != Success {
		return 0, resultErr(fmt.Sprintf("cuDeviceGetAttribute(%d)", a), r)
	}
	return int(v), nil
}

// Properties are the facts about a device that pinned memory depends on.
type Properties struct {
	Ordinal             int    `json:"ordinal"`
	Name                string `json:"name"`
	ComputeMajor        int    `json:"compute_major"`
	ComputeMinor        int    `json:"compute_minor"`
	TotalMem            uint64 `json:"total_mem_bytes"`
	MultiprocessorCount int    `json:"multiprocessors"`
	// Integrated is true for GPUs that share the host's memory (Jetson).
	Integrated bool `json:"integrated"`
	// CanMapHostMemory allows the DeviceMap flag (zero-copy).
	CanMapHostMemory bool `json:"can_map_host_memory"`
	// UnifiedAddressing means host and device share one address space, so a
	// mapped host pointer is also its device pointer.
	UnifiedAddressing bool `json:"unified_addressing"`
	PCIDomainID       int  `json:"pci_domain_id"`
	PCIBusID          int  `json:"pci_bus_id"`
	PCIDeviceID       int  `json:"pci_device_id"`
	// HostNUMAID is the host NUMA node closest to the device, or -1 where the
	// system has no NUMA or the driver does not report it (before CUDA 12.2).
	HostNUMAID int `json:"host_numa_id"`
	// HostRegisterSupported allows cuMemHostRegister (false on Jetson before
	// compute 7.2, which lacks I/O coherency).
	HostRegisterSupported bool `json:"host_register_supported"`
	// ReadOnlyHostRegisterSupported allows the ReadOnly register flag.
	ReadOnlyHostRegisterSupported bool `json:"read_only_host_register_supported"`
	// AsyncEngineCount is the number of copy engines: 2 or more can copy in
	// both directions at once.
	AsyncEngineCount int `json:"async_engine_count"`
	// PageableMemoryAccess means the device can read pageable memory
	// coherently without registration (HMM or ATS systems).
	PageableMemoryAccess bool `json:"pageable_memory_access"`
}

// Compute is the compute capability as "major.minor".
func (p Properties) Compute() string { return fmt.Sprintf("%d.%d", p.ComputeMajor, p.ComputeMinor) }

// PCIAddress is the device's PCI address as domain:bus:device.0.
func (p Properties) PCIAddress() string {
	return fmt.Sprintf("%04x:%02x:%02x.0", p.PCIDomainID, p.PCIBusID, p.PCIDeviceID)
}

// Properties reads all of the device's Properties. An attribute the driver
// does not know (an older driver) reads as its zero value, or -1 for
// HostNUMAID; any other failure is returned.
func (d Device) Properties() (Properties, error) {
	p := Properties{Ordinal: d.ordinal, HostNUMAID: -1}
	var err error
	if p.Name, err = d.Name(); err != nil {
		return p, err
	}
	if p.TotalMem, err = d.TotalMem(); err != nil {
		return p, err
	}
	ints := []struct {
		a        Attribute
		dst      *int
		optional bool
	}{
		{AttrComputeCapabilityMajor, &p.ComputeMajor, false},
		{AttrComputeCapabilityMinor, &p.ComputeMinor, false},
		{AttrMultiprocessorCount, &p.MultiprocessorCount, false},
		{AttrPCIDomainID, &p.PCIDomainID, false},
		{AttrPCIBusID, &p.PCIBusID, false},
		{AttrPCIDeviceID, &p.PCIDeviceID, false},
		{AttrAsyncEngineCount, &p.AsyncEngineCount, false},
		{AttrHostNUMAID, &p.HostNUMAID, true},
	}
	for _, x := range ints {
		v, err := d.Attribute(x.a)
		if err != nil {
			if x.optional && isUnknownAttribute(err) {
				continue
			}
			return p, err
		}
		*x.dst = v
	}
	bools := []struct {
		a        Attribute
		dst      *bool
		optional bool
	}{
		{AttrIntegrated, &p.Integrated, false},
		{AttrCanMapHostMemory, &p.CanMapHostMemory, false},
		{AttrUnifiedAddressing, &p.UnifiedAddressing, false},
		{AttrHostRegisterSupported, &p.HostRegisterSupported, true},
		{AttrReadOnlyHostRegisterSupported, &p.ReadOnlyHostRegisterSupported, true},
		{AttrPageableMemoryAccess, &p.PageableMemoryAccess, true},
	}
	for _, x := range bools {
		v, err := d.Attribute(x.a)
		if err != nil {
			if x.optional && isUnknownAttribute(err) {
				continue
			}
			return p, err
		}
		*x.dst = v != 0
	}
	return p, nil
}

// isUnknownAttribute reports whether an attribute query failed because the
// driver is older than the attribute.
func isUnknownAttribute(err error) bool {
	return errors.Is(err, ErrInvalidValue) || errors.Is(err, ErrNotSupported)
}
