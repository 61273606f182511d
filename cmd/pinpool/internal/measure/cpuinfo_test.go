package measure

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

const x86CPUInfo = `processor	: 0
vendor_id	: GenuineIntel
cpu family	: 6
model		: 143
model name	: Intel(R) Xeon(R) Platinum 8480+
stepping	: 8
cpu MHz		: 2000.000
flags		: fpu vme de pse tsc msr pae mce cx8

processor	: 1
vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) Platinum 8480+
`

const arm64CPUInfo = `processor	: 0
BogoMIPS	: 50.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x3
CPU part	: 0xd0c
CPU revision	: 1

processor	: 1
BogoMIPS	: 50.00
CPU implementer	: 0x41
CPU part	: 0xd0c
`

func TestParseCPUModel(t *testing.T) {
	for _, tc := range []struct{ name, info, want string }{
		{"x86", x86CPUInfo, "Intel(R) Xeon(R) Platinum 8480+"},
		{"arm64 Neoverse-N1", arm64CPUInfo, "Arm Neoverse-N1"},
		{"Jetson Orin", "processor : 0\nCPU implementer : 0x41\nCPU part : 0xd42\n", "Arm Cortex-A78AE"},
		{"unknown Arm core", "CPU implementer\t: 0x61\nCPU part\t: 0x022\n", "Arm core, implementer 0x61, part 0x022"},
		{"arm32", "Processor\t: ARMv7 Processor rev 10 (v7l)\nprocessor\t: 0\nHardware\t: BCM2835\n", "ARMv7 Processor rev 10 (v7l)"},
		{"arm32 hardware only", "processor\t: 0\nHardware\t: BCM2835\n", "BCM2835"},
		// qemu-user shows the host's cpuinfo to an arm64 binary on x86.
		{"qemu-user on x86", x86CPUInfo, "Intel(R) Xeon(R) Platinum 8480+"},
		{"POWER", "processor\t: 0\ncpu\t\t: POWER9, altivec supported\nclock\t\t: 3800.000000MHz\n", "POWER9, altivec supported"},
		{"RISC-V", "processor\t: 0\nhart\t\t: 1\nisa\t\t: rv64imafdc\nmmu\t\t: sv39\nuarch\t\t: sifive,u74-mc\n", "sifive,u74-mc"},
		{"MIPS", "system type\t\t: MT7621\ncpu model\t\t: MIPS 1004Kc V2.15\n", "MIPS 1004Kc V2.15"},
		{"empty", "", ""},
		{"empty model name, then one", "model name\t:\nmodel name\t: Second\n", "Second"},
		{"no colons", "garbage\nmore garbage\n", ""},
		{"binary", "\x00\xff\xfe:\x01\x02\n\x7f", ""},
		{"control characters", "model name\t: AMD\x1b[31m EPYC\t9654\r\n", "AMD [31m EPYC 9654"},
		{"only a colon", ":", ""},
		{"long", "model name : " + strings.Repeat("x", 300), strings.Repeat("x", maxModelLen)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseCPUModel([]byte(tc.info)); got != tc.want {
				t.Errorf("parseCPUModel = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzParseCPUModel: any text, cpuinfo or not, gives one printable line
// of at most maxModelLen characters, and never panics.
func FuzzParseCPUModel(f *testing.F) {
	for _, s := range []string{x86CPUInfo, arm64CPUInfo, "", ":", "CPU implementer: 0x41\nCPU part: 0xd0c", "model name: \xff\xfe"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := parseCPUModel(b)
		if !utf8.ValidString(m) || utf8.RuneCountInString(m) > maxModelLen || m != strings.TrimSpace(m) || strings.Contains(m, "  ") {
			t.Fatalf("parseCPUModel = %q", m)
		}
		for _, r := range m {
			if !unicode.IsPrint(r) {
				t.Fatalf("parseCPUModel = %q: unprintable %U", m, r)
			}
		}
	})
}

func TestCPUModelHere(t *testing.T) {
	// Whatever this machine's cpuinfo says, reading it must not panic.
	t.Logf("CPU model: %q", cpuModel())
}
