package cuda

import (
	"os"
	"path/filepath"
	"regexp"
)

// DriverRelease returns the release of the NVIDIA driver, as nvidia-smi
// shows it ("580.159.04"), or "" when it cannot be found. DriverVersion
// is another number: the CUDA version the driver supports (13000 for
// CUDA 13.0). The release is read from /proc/driver/nvidia/version, else
// from the file name behind the loaded libcuda.so.1 (libcuda.so.580.159.04).
// It needs no driver call.
func DriverRelease() string {
	if b, err := os.ReadFile("/proc/driver/nvidia/version"); err == nil {
		if v := releaseFromProc(string(b)); v != "" {
			return v
		}
	}
	if p := LibraryPath(); p != "" {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return releaseFromLibrary(real)
		}
	}
	return ""
}

var (
	procRelease = regexp.MustCompile(`(?m)^NVRM version:.*?\s(\d+\.\d+(?:\.\d+)?)\s`)
	libRelease  = regexp.MustCompile(`^libcuda\.so\.(\d{3,}\.\d+(?:\.\d+)?)$`) // a release starts at 100; Jetson's libcuda.so.1.1 is a soname
)

// releaseFromProc finds the release in the text of
// /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64 Kernel
// Module  580.159.04  Tue ...").
func releaseFromProc(s string) string {
	if m := procRelease.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// releaseFromLibrary finds the release in a library file name
// (libcuda.so.580.159.04); a bare libcuda.so.1 has none.
func releaseFromLibrary(path string) string {
	if m := libRelease.FindStringSubmatch(filepath.Base(path)); m != nil {
		return m[1]
	}
	return ""
}
