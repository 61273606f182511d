package measure

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/hostmem"
)

// hostMachine describes the host side of this machine.
func hostMachine() Machine {
	m := Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), CPUModel: cpuModel()}
	m.Hostname, _ = os.Hostname()
	if mi, err := hostmem.ReadMemInfo(); err == nil {
		m.MemTotal = int64(mi.Total)
	}
	return m
}

// addGPU fills in the GPU fields from the device's properties.
func (m *Machine) addGPU(p cuda.Properties) {
	m.GPU = p.Name
	m.ComputeCapability = p.Compute()
	m.Integrated = p.Integrated
	m.CanMapHostMemory = p.CanMapHostMemory
	if v, err := cuda.DriverVersion(); err == nil {
		m.Driver = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	m.DriverRelease = cuda.DriverRelease()
	m.PCIe = pcieLink(p.PCIAddress())
}

// pcieLink reads the current PCIe link of the device at addr
// ("0000:1b:00.0") from sysfs: "32.0 GT/s x16", or "" when unknown.
func pcieLink(addr string) string {
	dir := "/sys/bus/pci/devices/" + strings.ToLower(addr)
	speed, err1 := os.ReadFile(dir + "/current_link_speed")
	width, err2 := os.ReadFile(dir + "/current_link_width")
	if err1 != nil || err2 != nil {
		return ""
	}
	sp := strings.TrimSuffix(strings.TrimSpace(string(speed)), " PCIe") // "32.0 GT/s PCIe"
	return fmt.Sprintf("%s x%s", sp, strings.TrimSpace(string(width)))
}
