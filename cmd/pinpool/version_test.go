package main

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionLine(t *testing.T) {
	out, errOut, code := runCLI(t, "version")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("want exactly one line, got %q", out)
	}
	line := strings.TrimSuffix(out, "\n")
	if !strings.HasPrefix(line, "pinpool ") {
		t.Errorf("line does not start with %q: %q", "pinpool ", line)
	}
	if !strings.Contains(line, " "+runtime.Version()+" ") {
		t.Errorf("line lacks the Go version %s: %q", runtime.Version(), line)
	}
	if !strings.HasSuffix(line, " "+runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("line does not end with %s/%s: %q", runtime.GOOS, runtime.GOARCH, line)
	}
	if strings.Contains(line, "  ") {
		t.Errorf("line has an empty field: %q", line)
	}
}

func TestVersionFlag(t *testing.T) {
	want, _, code := runCLI(t, "version")
	if code != 0 {
		t.Fatalf("version: exit %d", code)
	}
	out, errOut, code := runCLI(t, "--version")
	if code != 0 {
		t.Fatalf("--version: exit %d, stderr %s", code, errOut)
	}
	if out != want {
		t.Errorf("--version printed %q, version printed %q", out, want)
	}
	if errOut != "" {
		t.Errorf("--version wrote to stderr: %q", errOut)
	}
}

func TestVersionJSON(t *testing.T) {
	out, errOut, code := runCLI(t, "version", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var keys map[string]any
	if err := json.Unmarshal([]byte(out), &keys); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"version", "revision", "time", "modified", "go", "os", "arch"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("JSON lacks key %q:\n%s", k, out)
		}
	}
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("does not decode into versionInfo: %v\n%s", err, out)
	}
	if v.Version == "" || v.Revision == "" {
		t.Errorf("empty version or revision: %+v", v)
	}
	if v.Go != runtime.Version() || v.OS != runtime.GOOS || v.Arch != runtime.GOARCH {
		t.Errorf("go/os/arch = %s %s/%s, want %s %s/%s", v.Go, v.OS, v.Arch, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	if line, _, _ := runCLI(t, "version"); strings.TrimSuffix(line, "\n") != v.String() {
		t.Errorf("JSON %+v formats as %q, version printed %q", v, v.String(), line)
	}
}

func TestVersionFrom(t *testing.T) {
	const rev = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want versionInfo
		line string
	}{
		{
			name: "no build info",
			bi:   nil,
			want: versionInfo{Version: "(devel)", Revision: "unknown", Go: "go1.26.8", OS: "linux", Arch: "amd64"},
			line: "pinpool (devel) unknown revision go1.26.8 linux/amd64",
		},
		{
			name: "test binary, empty version",
			bi:   &debug.BuildInfo{},
			want: versionInfo{Version: "(devel)", Revision: "unknown", Go: "go1.26.8", OS: "linux", Arch: "amd64"},
			line: "pinpool (devel) unknown revision go1.26.8 linux/amd64",
		},
		{
			name: "devel without vcs",
			bi: &debug.BuildInfo{
				Main:     debug.Module{Path: "github.com/pinpool/pinpool", Version: "(devel)"},
				Settings: settings("-compiler", "gc", "GOOS", "linux"),
			},
			want: versionInfo{Version: "(devel)", Revision: "unknown", Go: "go1.26.8", OS: "linux", Arch: "amd64"},
			line: "pinpool (devel) unknown revision go1.26.8 linux/amd64",
		},
		{
			name: "devel clean",
			bi: &debug.BuildInfo{
				Main:     debug.Module{Version: "(devel)"},
				Settings: settings("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-30T18:00:00Z", "vcs.modified", "false"),
			},
			want: versionInfo{Version: "(devel)", Revision: "1a2b3c4d5e6f", Time: "2026-11-30T18:00:00Z", Go: "go1.26.8", OS: "linux", Arch: "amd64"},
			line: "pinpool (devel) 1a2b3c4d5e6f 2026-11-30T18:00:00Z go1.26.8 linux/amd64",
		},
		{
			name: "dirty",
			bi: &debug.BuildInfo{
				Main:     debug.Module{Version: "(devel)"},
				Settings: settings("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-30T18:00:00Z", "vcs.modified", "true"),
			},
			want: versionInfo{Version: "(devel)", Revision: "1a2b3c4d5e6f", Time: "2026-11-30T18:00:00Z", Modified: true, Go: "go1.26.8", OS: "linux", Arch: "amd64"},
			line: "pinpool (devel) 1a2b3c4d5e6f+dirty 2026-11-30T18:00:00Z go1.26.8 linux/amd64",
		},
		{
			name: "tagged (go install @v0.3.1, no vcs)",
			bi: &debug.BuildInfo{
				Main: debug.Module{Path: "github.com/pinpool/pinpool", Version: "v0.3.1", Sum: "h1:abc="},
			},
			want: versionInfo{Version: "v0.3.1", Revision: "unknown", Go: "go1.26.8", OS: "darwin", Arch: "arm64"},
			line: "pinpool v0.3.1 unknown revision go1.26.8 darwin/arm64",
		},
		{
			name: "tagged with vcs",
			bi: &debug.BuildInfo{
				Main:     debug.Module{Version: "v0.3.1"},
				Settings: settings("vcs.revision", rev, "vcs.time", "2026-11-30T18:00:00Z", "vcs.modified", "false"),
			},
			want: versionInfo{Version: "v0.3.1", Revision: "1a2b3c4d5e6f", Time: "2026-11-30T18:00:00Z", Go: "go1.26.8", OS: "linux", Arch: "amd64"},
			line: "pinpool v0.3.1 1a2b3c4d5e6f 2026-11-30T18:00:00Z go1.26.8 linux/amd64",
		},
		{
			name: "missing time",
			bi: &debug.BuildInfo{
				Main:     debug.Module{Version: "(devel)"},
				Settings: settings("vcs.revision", rev, "vcs.modified", "true"),
			},
			want: versionInfo{Version: "(devel)", Revision: "1a2b3c4d5e6f", Modified: true, Go: "go1.26.8", OS: "linux", Arch: "amd64"},
			line: "pinpool (devel) 1a2b3c4d5e6f+dirty go1.26.8 linux/amd64",
		},
		{
			name: "short revision, empty revision ignored",
			bi: &debug.BuildInfo{
				Main:     debug.Module{Version: "(devel)"},
				Settings: settings("vcs.revision", "abc123", "vcs.time", "2026-11-30T18:00:00Z"),
			},
			want: versionInfo{Version: "(devel)", Revision: "abc123", Time: "2026-11-30T18:00:00Z", Go: "go1.26.8", OS: "linux", Arch: "amd64"},
			line: "pinpool (devel) abc123 2026-11-30T18:00:00Z go1.26.8 linux/amd64",
		},
		{
			name: "empty revision value",
			bi: &debug.BuildInfo{
				Main:     debug.Module{Version: "(devel)"},
				Settings: settings("vcs.revision", "", "vcs.modified", "true"),
			},
			want: versionInfo{Version: "(devel)", Revision: "unknown", Modified: true, Go: "go1.26.8", OS: "linux", Arch: "amd64"},
			line: "pinpool (devel) unknown revision go1.26.8 linux/amd64",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			goos, goarch := tc.want.OS, tc.want.Arch
			got := versionFrom(tc.bi, "go1.26.8", goos, goarch)
			if got != tc.want {
				t.Errorf("versionFrom = %+v, want %+v", got, tc.want)
			}
			if line := got.String(); line != tc.line {
				t.Errorf("String() = %q, want %q", line, tc.line)
			}
		})
	}
}
