package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// versionCmd is `pinpool version`.
type versionCmd struct {
	JSON bool `short:"j" help:"Print JSON instead of one line."`
}

func (c *versionCmd) Run(g *globals) error {
	v := currentVersion()
	if c.JSON {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	_, err := fmt.Fprintln(g.stdout, v.String())
	return err
}

// versionInfo is what `pinpool version` reports; it is also the --json schema.
type versionInfo struct {
	Version  string `json:"version"`  // module version: "(devel)", "v0.3.1", a pseudo-version
	Revision string `json:"revision"` // VCS revision, 12 hex digits, or "unknown"
	Time     string `json:"time"`     // VCS commit time (RFC 3339), "" when unknown
	Modified bool   `json:"modified"` // the working tree had uncommitted changes
	Go       string `json:"go"`       // runtime.Version()
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// unknownRevision is the revision when the binary carries no VCS
// information (go run, test binaries, -buildvcs=false, builds outside a
// repository).
const unknownRevision = "unknown"

// currentVersion describes this binary.
func currentVersion() versionInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return versionFrom(bi, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// versionFrom describes a binary from its build information (nil when there
// is none) and the Go version and platform it runs on.
func versionFrom(bi *debug.BuildInfo, goVersion, goos, goarch string) versionInfo {
	v := versionInfo{
		Version:  "(devel)",
		Revision: unknownRevision,
		Go:       goVersion,
		OS:       goos,
		Arch:     goarch,
	}
	if bi == nil {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				v.Revision = shortRevision(s.Value)
			}
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// shortRevision cuts a revision (a git SHA-1 or SHA-256 hash) to 12 digits.
func shortRevision(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// String is the one-line form, for `pinpool version` and `pinpool --version`:
//
//	pinpool (devel) 1a2b3c4d5e6f+dirty 2026-11-30T18:00:00Z go1.26.8 linux/amd64
//
// Without VCS information the revision reads "unknown revision"; an unknown
// time is left out rather than printed empty.
func (v versionInfo) String() string {
	fields := []string{"pinpool", orDefault(v.Version, "(devel)")}
	if v.Revision == "" || v.Revision == unknownRevision {
		fields = append(fields, "unknown revision")
	} else {
		rev := v.Revision
		if v.Modified {
			rev += "+dirty"
		}
		fields = append(fields, rev)
	}
	if v.Time != "" {
		fields = append(fields, v.Time)
	}
	fields = append(fields,
		orDefault(v.Go, "unknown-go"),
		orDefault(v.OS, "unknown")+"/"+orDefault(v.Arch, "unknown"))
	return strings.Join(fields, " ")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
