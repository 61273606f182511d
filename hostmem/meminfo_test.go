package hostmem

import (
	"runtime"
	"testing"
)

func TestParseMemInfo(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    MemInfo
		wantErr bool
	}{
		{"typical", "MemTotal:       16318340 kB\nMemFree:         1000 kB\nMemAvailable:   12000000 kB\nMlocked:            4096 kB\n",
			MemInfo{16318340 * 1024, 12000000 * 1024, 4096 * 1024}, false},
		{"no mlocked", "MemTotal: 10 kB\nMemAvailable: 5 kB\n", MemInfo{10240, 5120, 0}, false},
		{"no available", "MemTotal: 10 kB\n", MemInfo{}, true},
		{"garbage value", "MemTotal: ten kB\nMemAvailable: 5 kB\n", MemInfo{}, true},
		{"overflow", "MemTotal: 18446744073709551615 kB\nMemAvailable: 5 kB\n", MemInfo{}, true},
		{"empty", "", MemInfo{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMemInfo([]byte(tt.in))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("parseMemInfo = %+v, %v; want %+v, err %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestReadMemInfo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/meminfo is Linux only")
	}
	m, err := ReadMemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if m.Total == 0 || m.Available == 0 || m.Available > m.Total {
		t.Fatalf("implausible %+v", m)
	}
}

func FuzzParseMemInfo(f *testing.F) {
	f.Add([]byte("MemTotal: 1 kB\nMemAvailable: 1 kB\nMlocked: 0 kB\n"))
	f.Add([]byte("MemTotal:\nMemAvailable: x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMemInfo(b)
		if err == nil && (m.Total%1024 != 0 || m.Available%1024 != 0 || m.Mlocked%1024 != 0) {
			t.Fatalf("values not whole kB: %+v", m)
		}
	})
}
