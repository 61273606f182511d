package cuda

import "testing"

func TestDriverReleaseParsing(t *testing.T) {
	for _, tt := range []struct{ proc, want string }{
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue Sep 30 00:00:00 UTC 2026\nGCC version:  gcc version 12\n", "580.159.04"},
		{"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build\n", "575.57.08"},
		{"NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  540.4.0  Release Build\n", "540.4.0"},
		{"GCC version: 12\n", ""},
		{"", ""},
	} {
		if got := releaseFromProc(tt.proc); got != tt.want {
			t.Errorf("releaseFromProc(%q) = %q, want %q", tt.proc, got, tt.want)
		}
	}
	for _, tt := range []struct{ path, want string }{
		{"/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04", "580.159.04"},
		{"/usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1.1", ""},
		{"/usr/local/nvidia/lib64/libcuda.so.1", ""},
		{"/usr/lib/libcuda.so", ""},
	} {
		if got := releaseFromLibrary(tt.path); got != tt.want {
			t.Errorf("releaseFromLibrary(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}
