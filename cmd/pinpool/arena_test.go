package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pinpool/pinpool/cuda"
)

// TestArenaHost measures a small arena on the host backend (the GPU host
// runs it on the CUDA ways) and checks every figure is there.
func TestArenaHost(t *testing.T) {
	if cuda.Load() == nil {
		t.Skip("a GPU is present: the host ways are not the default here")
	}
	needLockable(t, 4<<20)
	lines, errOut := arenaJSON(t, 3, "--sizes", "4MiB", "--ways", "host,pool+host:blocks=2MiB,pool+host")
	for i, want := range []string{"host", "pool+host:blocks=2MiB", "pool+host"} {
		var r struct {
			Way   string  `json:"way"`
			Bytes int64   `json:"bytes"`
			Took  int64   `json:"took_ns"`
			GBps  float64 `json:"gb_per_s"`
			Close int64   `json:"close_ns"`
			Huge  *int64  `json:"huge_bytes"`
			Held  int64   `json:"held_bytes"`
			Error string  `json:"error"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &r); err != nil {
			t.Fatalf("line %d: %v\n%s", i, err, lines[i])
		}
		if r.Way != want || r.Bytes != 4<<20 || r.Error != "" || r.Took <= 0 || r.GBps <= 0 || r.Close <= 0 {
			t.Errorf("line %d: %+v, want way %q of 4 MiB measured without error", i, r, want)
		}
		if pool := strings.HasPrefix(want, "pool"); pool != (r.Held >= r.Bytes) {
			t.Errorf("line %d: held_bytes %d for a way of %d bytes (a pool's holds them all, the others report none)", i, r.Held, r.Bytes)
		}
		if r.Huge == nil || *r.Huge < 0 || *r.Huge > max(r.Bytes, r.Held) {
			t.Errorf("line %d: huge_bytes %v, want 0 to %d", i, r.Huge, max(r.Bytes, r.Held))
		}
	}
	if !strings.Contains(errOut, "no GPU") {
		t.Errorf("stderr does not say there is no GPU:\n%s", errOut)
	}
}

// TestArenaUsage checks that bad ways and sizes are usage errors, refused
// before anything is measured.
func TestArenaUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"arena", "--ways", "bogus"}, `unknown kind "bogus"`},
		{[]string{"arena", "--ways", "register:piece=3"}, "piece=3: want a positive multiple of 4 KiB"},
		{[]string{"arena", "--ways", "pool:regw=2"}, `unknown knob "regw" for pool`},
		{[]string{"arena", "--ways", "pool+nothing"}, `unknown backend "nothing"`},
	} {
		_, errOut, code := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr:\n%s\nwant exit 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	_, errOut, code := runCLI(t, "arena", "--sizes", "64TiB", "--ways", "host")
	if code != 1 || !strings.Contains(errOut, "MemAvailable") {
		t.Errorf("a 64 TiB arena: exit %d, stderr:\n%s\nwant exit 1 naming MemAvailable", code, errOut)
	}
	if strings.Contains(errOut, "pinpool: pinpool") {
		t.Errorf("the refusal names the tool twice:\n%s", errOut)
	}
}

// TestArenaGPURegistrations measures small arenas on the CUDA ways and
// checks the registration calls each reports: a register way's chunk is
// pinned in pieces of at most its piece size (more calls where a piece is
// split to bound the lock), a hostalloc way's chunk by one call.
func TestArenaGPURegistrations(t *testing.T) {
	if !hasGPU() {
		t.Skip("no GPU: the register and hostalloc ways need one")
	}
	lines, _ := arenaJSON(t, 3, "--sizes", "64MiB", "--ways", "register,register:piece=4MiB,hostalloc:alloc=16MiB")
	for i, tc := range []struct {
		way      string
		min, max int
	}{
		{"register", 4, 64 << 20 / (2 << 20)}, // 16 MiB pieces, each call at least a huge page
		{"register:piece=4MiB", 16, 64 << 20 / (2 << 20)},
		{"hostalloc:alloc=16MiB", 4, 4},
	} {
		var r struct {
			Way   string `json:"way"`
			Regs  int    `json:"registrations"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &r); err != nil {
			t.Fatalf("line %d: %v\n%s", i, err, lines[i])
		}
		if r.Way != tc.way || r.Error != "" || r.Regs < tc.min || r.Regs > tc.max {
			t.Errorf("line %d: %+v, want way %q made in %d to %d calls without error", i, r, tc.way, tc.min, tc.max)
		}
	}
}

// arenaJSON runs `pinpool arena --json --progress never` with args, and
// returns its want JSON lines and its standard error; it fails t unless
// the tool exits 0 with that many lines.
func arenaJSON(t *testing.T, want int, args ...string) (lines []string, stderr string) {
	t.Helper()
	out, errOut, code := runCLI(t, append([]string{"arena", "--json", "--progress", "never"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != want {
		t.Fatalf("%d JSON lines, want %d:\n%s", len(lines), want, out)
	}
	return lines, errOut
}
