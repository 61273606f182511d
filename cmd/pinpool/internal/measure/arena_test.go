package measure

import (
	"strings"
	"testing"
	"time"
)

func TestParseArenaWay(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want ArenaWay
		err  string
	}{
		{"pool", ArenaWay{Kind: "pool", Huge: true}, ""},
		{"pool+register+small:blocks=2MiB", ArenaWay{Kind: "pool", Backend: "register+small", Blocks: 2 << 20, Huge: true}, ""},
		{"register:piece=32MiB:prefault=8:regw=2:huge=0:pause=100us:alloc=1GiB", ArenaWay{Kind: "register", Piece: 32 << 20, Prefault: 8, RegWorkers: 2, Alloc: 1 << 30, Pause: 100 * time.Microsecond}, ""},
		{"register:pause=off", ArenaWay{Kind: "register", Huge: true, Pause: -1}, ""},
		{"register:group=off", ArenaWay{}, "multiple of 4 KiB"},
		{"register:group=512MiB", ArenaWay{Kind: "register", Huge: true, Group: 512 << 20}, ""},
		{"register:group=5000", ArenaWay{}, "multiple of 4 KiB"},
		{"pool:group=1GiB", ArenaWay{}, "unknown knob"},
		{"pool+cudahost:blocks=1GiB", ArenaWay{Kind: "pool", Backend: "cudahost", Blocks: 1 << 30, Huge: true}, ""},
		{"hostalloc:alloc=2MiB", ArenaWay{Kind: "hostalloc", Alloc: 2 << 20, Huge: true}, ""},
		{"hostalloc-raw", ArenaWay{Kind: "hostalloc-raw", Huge: true}, ""},
		{"bogus", ArenaWay{}, "unknown kind"},
		{"pool+gpu", ArenaWay{}, "unknown backend"},
		{"host+register", ArenaWay{}, "takes no backend"},
		{"register:piece", ArenaWay{}, "not NAME=VALUE"},
		{"register:piece=4095", ArenaWay{}, "multiple of 4 KiB"},
		{"register:piece=-4096", ArenaWay{}, "multiple of 4 KiB"},
		{"register:regw=0", ArenaWay{}, "positive number"},
		{"register:huge=2", ArenaWay{}, "want 0 or 1"},
		{"register:pause=-1s", ArenaWay{}, "duration"},
		{"pool:piece=1MiB", ArenaWay{}, "unknown knob"},
		{"register:alloc=9999999TiB", ArenaWay{}, "multiple of 4 KiB"},
	} {
		got, err := ParseArenaWay(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseArenaWay(%q) = %+v, %v; want an error saying %q", tc.spec, got, err, tc.err)
			}
			continue
		}
		tc.want.Spec = tc.spec
		if err != nil || got != tc.want {
			t.Errorf("ParseArenaWay(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
}

// FuzzParseArenaWay checks that no spec panics, and that what parses is
// in range.
func FuzzParseArenaWay(f *testing.F) {
	for _, s := range []string{"pool", "pool+host:blocks=2MiB", "register:piece=64MiB:pause=off", "host:alloc=1TiB", "register:alloc=9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		w, err := ParseArenaWay(spec)
		if err != nil {
			return
		}
		if w.Blocks < 0 || w.Alloc < 0 || w.Piece < 0 || w.Prefault < 0 || w.RegWorkers < 0 || w.Blocks%4096 != 0 || w.Alloc%4096 != 0 {
			t.Fatalf("ParseArenaWay(%q) = %+v: out of range", spec, w)
		}
	})
}
