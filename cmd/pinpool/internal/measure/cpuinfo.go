package measure

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"
)

// cpuModel is the CPU's model as /proc/cpuinfo tells it ("" when it does
// not). It reads the few fields it needs itself: prometheus/procfs's
// parser picks a format by GOARCH and panics on a cpuinfo of another
// (qemu-user shows the host's; prometheus/procfs#330).
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCPUInfo))
	if err != nil {
		return ""
	}
	return parseCPUModel(b)
}

// maxCPUInfo bounds what cpuModel reads: the first CPU's lines come
// first, and a machine of hundreds of CPUs writes hundreds of KiB.
const maxCPUInfo = 1 << 20

// maxModelLen bounds the model's length in a report.
const maxModelLen = 100

// armParts names the Arm cores a GPU host is likely to have, by "CPU
// implementer" and "CPU part" (arm64 kernels write no model name).
var armParts = map[string]string{
	"0x41/0xd08": "Arm Cortex-A72", "0x41/0xd0b": "Arm Cortex-A76", "0x41/0xd0c": "Arm Neoverse-N1",
	"0x41/0xd40": "Arm Neoverse-V1", "0x41/0xd42": "Arm Cortex-A78AE", "0x41/0xd49": "Arm Neoverse-N2",
	"0x41/0xd4f": "Arm Neoverse-V2", "0x4e/0x004": "NVIDIA Carmel", "0xc0/0xac3": "Ampere-1",
}

// parseCPUModel finds the model of the first CPU in a /proc/cpuinfo text
// of any architecture: "model name" (x86, and arm32 on some kernels),
// "cpu model" (MIPS), "Processor" (old arm32), the Arm core from "CPU
// implementer" and "CPU part", "uarch" (RISC-V), "cpu" (POWER), or
// "Hardware". Anything else, or text that is not cpuinfo, gives "". The
// result is one printable line of at most maxModelLen characters.
func parseCPUModel(b []byte) string {
	first := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if _, seen := first[key]; !seen && val != "" {
			first[key] = val
		}
	}
	// A scanner error (a line over 64 KiB) leaves what was read before it.
	model := ""
	for _, k := range []string{"model name", "cpu model", "Processor"} {
		if v := first[k]; v != "" {
			model = v
			break
		}
	}
	if model == "" {
		impl, part := strings.ToLower(first["CPU implementer"]), strings.ToLower(first["CPU part"])
		if name, ok := armParts[impl+"/"+part]; ok {
			model = name
		} else if impl != "" && part != "" {
			model = "Arm core, implementer " + impl + ", part " + part
		}
	}
	for _, k := range []string{"uarch", "cpu", "Hardware"} {
		if model == "" {
			model = first[k]
		}
	}
	return printable(model, maxModelLen)
}

// printable makes s one line of printable characters (others become
// spaces, runs of spaces one), at most n of them.
func printable(s string, n int) string {
	var b strings.Builder
	count, space := 0, false
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			if count++; count > n {
				break
			}
			b.WriteByte(' ')
			space = false
		}
		if count++; count > n {
			break
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}
