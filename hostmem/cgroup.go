package hostmem

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/pinpool/pinpool/internal/units"
)

// ErrCgroup is wrapped by the errors ReadCgroupMemory, NewCgroupReader and
// CgroupReader.Read return when a cgroup or proc file cannot be read or
// holds something that is not what the kernel writes there. The wrapping
// error names the file; an error from the file system is wrapped as well.
var ErrCgroup = errors.New("hostmem: cannot read cgroup memory limits")

// RaiseCgroupLimitHint says how to give a process more room under its
// cgroup memory limit.
const RaiseCgroupLimitHint = "raise the container's memory limit (docker --memory, Kubernetes resources.limits.memory, systemd MemoryMax=) or lower the pool's Budget"

// cgroupNoLimit: a limit at or above it is no limit. cgroup v1 writes
// "unlimited" as the largest page multiple below 1<<63
// (9223372036854771712); no machine has 1<<62 bytes.
const cgroupNoLimit = 1 << 62

// CgroupMemory describes the memory limit of the cgroup the process runs in,
// taken at the level of its nested groups (the group and its ancestors up to
// the root of the mount) that leaves the least headroom. Locked (pinned)
// pages are charged to the group and cannot be reclaimed, so a process that
// locks past the headroom is throttled (memory.high) or OOM-killed
// (memory.max, memory.limit_in_bytes).
//
// The level with the least headroom is usually the one with the smallest
// limit, but not always: an ancestor with a larger limit that siblings
// already fill leaves less room than the process's own group. Limit,
// LimitFile, Usage and Reclaimable all belong to that one level (Path), so
// that Headroom is what the kernel will allow there. With no limit at any
// level, Path and Usage are those of the process's own group.
//
// Only the levels inside the cgroup mount are seen: a container whose mount
// shows its own group as the root (a cgroup namespace, or a v1 bind mount)
// cannot see a limit set on its pod or any group above it.
type CgroupMemory struct {
	Version     int    `json:"cgroup_version"`              // 1 or 2; 0: no cgroup memory controller found
	Path        string `json:"cgroup_path,omitempty"`       // the group's directory, e.g. /sys/fs/cgroup/kubepods.slice/pod1/ctr
	Limit       int64  `json:"cgroup_limit_bytes"`          // the binding limit in bytes; 0: no limit
	LimitFile   string `json:"cgroup_limit_file,omitempty"` // the file that set it: memory.max, memory.high or memory.limit_in_bytes
	Usage       int64  `json:"cgroup_usage_bytes"`          // memory.current (v2), memory.usage_in_bytes (v1)
	Reclaimable int64  `json:"cgroup_reclaimable_bytes"`    // inactive_file (v2), total_inactive_file (v1) in memory.stat: page cache the kernel drops before it kills (0 with no limit)
}

// Headroom returns how many more bytes the group can be charged before it
// reaches its limit: Limit - (Usage - Reclaimable), never negative; or -1
// when there is no limit.
func (c CgroupMemory) Headroom() int64 {
	if c.Limit <= 0 {
		return -1
	}
	return cgroupHeadroom(c.Limit, c.Usage, c.Reclaimable)
}

// cgroupHeadroom is limit - (usage - reclaimable), clamped to [0, limit]:
// the files are read one after another, so reclaimable may exceed usage.
func cgroupHeadroom(limit, usage, reclaimable int64) int64 {
	used := max(usage-reclaimable, 0)
	return max(limit-used, 0)
}

// String describes c in one sentence for messages, e.g.
// "cgroup v2 /sys/fs/cgroup/foo: memory.max 8 GiB, using 6.2 GiB (410 MiB reclaimable), 2.2 GiB headroom".
func (c CgroupMemory) String() string {
	switch {
	case c.Version == 0:
		return "no cgroup memory controller"
	case c.Limit <= 0:
		return fmt.Sprintf("cgroup v%d %s: no memory limit, using %s", c.Version, c.Path, units.Size(c.Usage))
	}
	return fmt.Sprintf("cgroup v%d %s: %s %s, using %s (%s reclaimable), %s headroom",
		c.Version, c.Path, c.LimitFile, units.Size(c.Limit), units.Size(c.Usage), units.Size(c.Reclaimable), units.Size(c.Headroom()))
}

// ReadCgroupMemory finds the cgroup of this process and reads its memory
// limit. See NewCgroupReader for what it finds and when.
func ReadCgroupMemory() (CgroupMemory, error) { return ReadCgroupMemoryAt("/") }

// ReadCgroupMemoryAt is ReadCgroupMemory on the file tree under root, which
// holds proc/self/cgroup, proc/self/mountinfo and the cgroup mounts (a
// recorded tree, in tests).
func ReadCgroupMemoryAt(root string) (CgroupMemory, error) {
	r, err := NewCgroupReader(root)
	if err != nil {
		return CgroupMemory{}, err
	}
	defer r.Close()
	return r.Read()
}

// CgroupReader keeps open the memory files of this process's cgroup and
// its ancestors, so that Read re-reads only the limit, usage and stat files
// and opens none. Close it when done. Its methods may be called
// concurrently.
type CgroupReader struct {
	version int
	dir     string        // the process's group
	levels  []cgroupLevel // the process's group first, then its ancestors up to the mount point

	mu     sync.Mutex
	buf    []byte
	closed bool
}

// cgroupLevel is one group directory and those of its memory files that
// exist.
type cgroupLevel struct {
	dir      string
	limits   []*cgroupFile // memory.max, memory.high (v2); memory.limit_in_bytes (v1)
	usage    *cgroupFile   // nil when absent (the v2 root)
	stat     *cgroupFile   // nil when absent
	statName string        // the memory.stat key of the reclaimable page cache
}

// cgroupFile is an open cgroup file, read again from offset 0 each time.
type cgroupFile struct {
	f    *os.File
	name string // base name, e.g. memory.max
}

// NewCgroupReader finds the cgroup of this process under root ("/" for the
// real system): its path from proc/self/cgroup, the mount of its hierarchy
// from proc/self/mountinfo, and the memory files of the group and each
// ancestor up to the mount point.
//
// It prefers cgroup v2 when the group's cgroup.controllers lists memory,
// and otherwise the v1 memory controller (hybrid systems mount both). When
// neither is there, or proc/self/cgroup or proc/self/mountinfo does not
// exist (not Linux, /proc not mounted), the reader reports Version 0 and no
// error: nothing is known to bound the process besides RAM. A file that
// exists but cannot be read or parsed is an error wrapping ErrCgroup.
//
// The files found are kept open (up to four a level): a process moved to
// another group later is still read in its old one, and a group removed
// makes Read fail (wrapping ErrCgroup); make a new reader then.
func NewCgroupReader(root string) (*CgroupReader, error) {
	if root == "" {
		root = "/"
	}
	r := &CgroupReader{}
	paths, ok, err := readProcFile(root, "proc/self/cgroup", parseProcCgroup)
	if err != nil {
		return nil, err
	}
	if !ok || (!paths.hasV1 && !paths.hasV2) {
		return r, nil
	}
	mounts, ok, err := readProcFile(root, "proc/self/mountinfo", parseMountInfo)
	if err != nil {
		return nil, err
	}
	if !ok {
		return r, nil
	}
	if paths.hasV2 {
		if m, ok := findCgroupMount(mounts, paths.v2, isCgroup2Mount); ok {
			rel := cgroupRel(m.root, paths.v2)
			point := filepath.Join(root, m.point)
			has, err := cgroup2HasMemory(filepath.Join(point, rel), point)
			if err != nil {
				return nil, err
			}
			if has {
				return r.walked(2, point, rel)
			}
		}
	}
	if paths.hasV1 {
		if m, ok := findCgroupMount(mounts, paths.v1, isCgroup1MemoryMount); ok {
			return r.walked(1, filepath.Join(root, m.point), cgroupRel(m.root, paths.v1))
		}
	}
	return r, nil
}

// readProcFile reads root/rel and parses it with parse. ok is false, with
// no error, when the file does not exist (no cgroup to read); a failure
// to read or parse it wraps ErrCgroup.
func readProcFile[T any](root, rel string, parse func([]byte) (T, error)) (v T, ok bool, err error) {
	name := filepath.Join(root, rel)
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return v, false, nil
	} else if err != nil {
		return v, false, fmt.Errorf("%w: %w", ErrCgroup, err)
	}
	if v, err = parse(b); err != nil {
		return v, false, fmt.Errorf("%w: %s: %w", ErrCgroup, name, err)
	}
	return v, true, nil
}

// Read reads the limits of every level, and the usage and reclaimable page
// cache of those with a limit, and returns the level with the least
// headroom. With no limit anywhere it reads only the usage of the process's
// own group (Reclaimable is then 0).
func (r *CgroupReader) Read() (CgroupMemory, error) {
	if r.version == 0 {
		return CgroupMemory{}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return CgroupMemory{}, fmt.Errorf("%w: %s: %w", ErrCgroup, r.dir, os.ErrClosed)
	}
	best := CgroupMemory{Version: r.version, Path: r.dir}
	bestRoom, found := int64(0), false
	for i, l := range r.levels {
		var limit int64
		var limitFile string
		for _, f := range l.limits {
			b, err := r.read(f)
			if err != nil {
				return CgroupMemory{}, err
			}
			v, err := parseCgroupLimit(b)
			if err != nil {
				return CgroupMemory{}, cgroupParseError(f.f.Name(), b, err)
			}
			if v > 0 && (limit == 0 || v < limit) {
				limit, limitFile = v, f.name
			}
		}
		switch {
		case limit == 0 && (i > 0 || found || l.usage == nil):
			continue
		case limit == 0: // the process's own group, unlimited: reported if no level has a limit
			usage, err := r.readBytes(l.usage)
			if err != nil {
				return CgroupMemory{}, err
			}
			best.Path, best.Usage = l.dir, usage
			continue
		case l.usage == nil:
			return CgroupMemory{}, fmt.Errorf("%w: %s has a limit in %s but no usage file", ErrCgroup, l.dir, limitFile)
		}
		usage, err := r.readBytes(l.usage)
		if err != nil {
			return CgroupMemory{}, err
		}
		var reclaimable int64
		if l.stat != nil {
			b, err := r.read(l.stat)
			if err != nil {
				return CgroupMemory{}, err
			}
			if reclaimable, _, err = parseCgroupStat(b, l.statName); err != nil {
				return CgroupMemory{}, fmt.Errorf("%w: %s: %w", ErrCgroup, l.stat.f.Name(), err)
			}
		}
		if room := cgroupHeadroom(limit, usage, reclaimable); !found || room < bestRoom {
			best = CgroupMemory{Version: r.version, Path: l.dir, Limit: limit, LimitFile: limitFile, Usage: usage, Reclaimable: reclaimable}
			bestRoom, found = room, true
		}
	}
	return best, nil
}

// Close closes the files r keeps open. Read fails after it.
func (r *CgroupReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	for _, l := range r.levels {
		for _, f := range append(l.limits, l.usage, l.stat) {
			if f != nil {
				errs = append(errs, f.f.Close())
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrCgroup, err)
	}
	return nil
}

// readBytes reads a usage file.
func (r *CgroupReader) readBytes(f *cgroupFile) (int64, error) {
	b, err := r.read(f)
	if err != nil {
		return 0, err
	}
	v, err := parseCgroupBytes(b)
	if err != nil {
		return 0, cgroupParseError(f.f.Name(), b, err)
	}
	return v, nil
}

// read reads f from offset 0 into r.buf, which it grows as needed. A cgroup
// file read from offset 0 shows the values of now.
func (r *CgroupReader) read(f *cgroupFile) ([]byte, error) {
	if r.buf == nil {
		r.buf = make([]byte, 8<<10)
	}
	for {
		n, err := f.f.ReadAt(r.buf, 0)
		if err == io.EOF {
			return r.buf[:n], nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCgroup, err)
		}
		r.buf = make([]byte, 2*len(r.buf)) // filled: there may be more
	}
}

// walked is r after walk, or nil and walk's error.
func (r *CgroupReader) walked(version int, point, rel string) (*CgroupReader, error) {
	if err := r.walk(version, point, rel); err != nil {
		return nil, err
	}
	return r, nil
}

// walk opens the memory files of the group at rel under the mount point
// and of each ancestor up to the mount point. Levels with no limit or usage
// file are left out.
func (r *CgroupReader) walk(version int, point, rel string) error {
	limitNames, usageName, statName := []string{"memory.limit_in_bytes"}, "memory.usage_in_bytes", "total_inactive_file"
	if version == 2 {
		limitNames, usageName, statName = []string{"memory.max", "memory.high"}, "memory.current", "inactive_file"
	}
	r.dir = filepath.Join(point, rel)
	r.version = version // so that Close closes what was opened
	for {
		dir := filepath.Join(point, rel)
		l := cgroupLevel{dir: dir, statName: statName}
		var err error
		for _, n := range limitNames {
			var f *cgroupFile
			if f, err = openCgroupFile(dir, n); f != nil {
				l.limits = append(l.limits, f)
			}
			if err != nil {
				break
			}
		}
		if err == nil {
			l.usage, err = openCgroupFile(dir, usageName)
		}
		if err == nil {
			l.stat, err = openCgroupFile(dir, "memory.stat")
		}
		r.levels = append(r.levels, l)
		if err != nil {
			r.Close()
			return err
		}
		if rel == "/" {
			break
		}
		rel = path.Dir(rel)
	}
	levels := r.levels[:0]
	for _, l := range r.levels {
		if len(l.limits) > 0 || l.usage != nil {
			levels = append(levels, l)
		} else if l.stat != nil {
			l.stat.f.Close()
		}
	}
	r.levels = levels
	return nil
}

// openCgroupFile opens dir/name; it returns nil and no error when the file
// does not exist.
func openCgroupFile(dir, name string) (*cgroupFile, error) {
	f, err := os.Open(filepath.Join(dir, name))
	switch {
	case err == nil:
		return &cgroupFile{f, name}, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	}
	return nil, fmt.Errorf("%w: %w", ErrCgroup, err)
}

// cgroup2HasMemory reports whether cgroup.controllers in dir (or, when dir
// has none, in the mount point) lists the memory controller.
func cgroup2HasMemory(dir, point string) (bool, error) {
	for _, d := range []string{dir, point} {
		name := filepath.Join(d, "cgroup.controllers")
		b, err := os.ReadFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return false, fmt.Errorf("%w: %w", ErrCgroup, err)
		}
		for _, c := range strings.Fields(string(b)) {
			if c == "memory" {
				return true, nil
			}
		}
		return false, nil
	}
	return false, nil
}

// cgroupParseError names the file and what it held.
func cgroupParseError(name string, b []byte, err error) error {
	s := string(bytes.TrimSpace(b))
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return fmt.Errorf("%w: %s holds %q: %w", ErrCgroup, name, s, err)
}

// parseCgroupLimit parses a limit file (memory.max, memory.high,
// memory.limit_in_bytes): a number of bytes or "max". It returns 0 for no
// limit: "max", or a value >= 1<<62 (v1's "unlimited"). A limit of 0, under
// which no process could be running, reads as none as well.
func parseCgroupLimit(b []byte) (int64, error) {
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	n, err := parseCgroupInt(s)
	if err != nil || n >= cgroupNoLimit {
		return 0, err
	}
	return n, nil
}

// parseCgroupBytes parses a usage file (memory.current,
// memory.usage_in_bytes): a number of bytes.
func parseCgroupBytes(b []byte) (int64, error) {
	return parseCgroupInt(strings.TrimSpace(string(b)))
}

// parseCgroupInt parses a non-negative decimal int64.
func parseCgroupInt(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("no value")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("want a number of bytes")
	}
	if n < 0 {
		return 0, errors.New("negative")
	}
	return n, nil
}

// parseCgroupStat finds the line "key value" in a memory.stat text and
// returns value. found is false when no line has the key.
func parseCgroupStat(b []byte, key string) (v int64, found bool, err error) {
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		rest, ok := bytes.CutPrefix(line, []byte(key))
		if !ok || len(rest) == 0 || (rest[0] != ' ' && rest[0] != '\t') || key == "" {
			continue
		}
		if v, err = parseCgroupInt(string(bytes.TrimSpace(rest))); err != nil {
			return 0, true, fmt.Errorf("line %q: %w", line, err)
		}
		return v, true, nil
	}
	return 0, false, nil
}

// procCgroup is what /proc/self/cgroup says about memory: the v2 path (line
// "0::/path") and the v1 memory controller's path (line "N:a,memory,b:/path").
type procCgroup struct {
	v2, v1       string
	hasV2, hasV1 bool
}

// parseProcCgroup parses a /proc/self/cgroup text.
func parseProcCgroup(b []byte) (procCgroup, error) {
	var p procCgroup
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		ctrls, cgPath, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || id == "" || strings.TrimLeft(id, "0123456789") != "" {
			return procCgroup{}, fmt.Errorf("line %q: want hierarchy-ID:controllers:path", line)
		}
		if id == "0" && ctrls == "" {
			if !p.hasV2 {
				p.v2, p.hasV2 = cgPath, true
			}
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			if c == "memory" && !p.hasV1 {
				p.v1, p.hasV1 = cgPath, true
			}
		}
	}
	return p, nil
}

// mountInfo is one line of /proc/self/mountinfo, as far as cgroups need it.
type mountInfo struct {
	root, point string // the mount's root within its file system, and where it is mounted (unescaped)
	fstype      string
	superOpts   string // the super block's options: which v1 controllers
}

// parseMountInfo parses a /proc/self/mountinfo text.
func parseMountInfo(b []byte) ([]mountInfo, error) {
	var ms []mountInfo
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		m, err := parseMountInfoLine(line)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// parseMountInfoLine parses "36 35 98:0 /root /mnt opts [optional...] - fstype source superopts".
// Fields are split at the characters the kernel escapes in paths.
func parseMountInfoLine(line string) (mountInfo, error) {
	f := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' })
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || len(f) < sep+4 {
		return mountInfo{}, fmt.Errorf("line %q: want id parent dev root point options ... - fstype source options", line)
	}
	root, err1 := unescapeMountPath(f[3])
	point, err2 := unescapeMountPath(f[4])
	if err := errors.Join(err1, err2); err != nil {
		return mountInfo{}, fmt.Errorf("line %q: %w", line, err)
	}
	return mountInfo{root: root, point: point, fstype: f[sep+1], superOpts: f[sep+3]}, nil
}

// unescapeMountPath undoes the kernel's octal escapes in mountinfo paths:
// \040 (space), \011 (tab), \012 (newline), \134 (backslash).
func unescapeMountPath(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("path %q: short escape", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("path %q: bad escape %q", s, s[i:i+4])
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

func isCgroup2Mount(m mountInfo) bool { return m.fstype == "cgroup2" }

func isCgroup1MemoryMount(m mountInfo) bool {
	if m.fstype != "cgroup" {
		return false
	}
	for _, o := range strings.Split(m.superOpts, ",") {
		if o == "memory" {
			return true
		}
	}
	return false
}

// findCgroupMount returns the mount that ok accepts whose root holds
// cgPath (the longest such root), or else the first one ok accepts.
func findCgroupMount(ms []mountInfo, cgPath string, ok func(mountInfo) bool) (mountInfo, bool) {
	var first, best mountInfo
	haveFirst, haveBest := false, false
	for _, m := range ms {
		if !ok(m) {
			continue
		}
		if !haveFirst {
			first, haveFirst = m, true
		}
		if underMountRoot(m.root, cgPath) && (!haveBest || len(m.root) > len(best.root)) {
			best, haveBest = m, true
		}
	}
	if haveBest {
		return best, true
	}
	return first, haveFirst
}

// underMountRoot reports whether cgroup path p lies in the tree under a
// mount whose root is mountRoot.
func underMountRoot(mountRoot, p string) bool {
	mountRoot = path.Clean("/" + mountRoot)
	return mountRoot == "/" || p == mountRoot || strings.HasPrefix(p, mountRoot+"/")
}

// cgroupRel maps the cgroup path p (from /proc/self/cgroup) into a mount
// whose root is mountRoot: the path of the group's directory below the
// mount point, "/" for the mount point itself. A path that is not under
// the mount root (or not a clean absolute path, as a process outside its
// cgroup namespace sees "/../x") maps to the mount point.
func cgroupRel(mountRoot, p string) string {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p && path.Clean(p)+"/" != p {
		return "/"
	}
	p = path.Clean(p)
	mountRoot = path.Clean("/" + mountRoot)
	switch {
	case mountRoot == "/":
		return p
	case p == mountRoot:
		return "/"
	case strings.HasPrefix(p, mountRoot+"/"):
		return p[len(mountRoot):]
	}
	return "/"
}
