package hostmem

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCheckNodeReal binds a region to node 0 and checks that the sampled
// pages are found there (the machine has at least node 0).
func TestCheckNodeReal(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/node/node0"); err != nil {
		t.Skip("no /sys/devices/system/node/node0: kernel without NUMA support")
	}
	skipWithoutMbind(t)
	r, err := Map(8<<20, Options{BindNUMA: true, NUMANode: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unmap()
	if err := r.CheckNode(); err != nil {
		t.Fatal(err)
	}
}

// TestCheckNodeFake puts the host's one node behind a fake move_pages that
// reports pages elsewhere, as a host that ignored the binding would, and
// checks that Map, Alloc and CheckNode refuse the region and leave nothing
// mapped, naming the page; that the sample covers the first and last
// page; and that an unbound region is not checked.
func TestCheckNodeFake(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/node/node0"); err != nil {
		t.Skip("no /sys/devices/system/node/node0: kernel without NUMA support")
	}
	skipWithoutMbind(t)
	real := pageNodes
	t.Cleanup(func() { pageNodes = real })
	const size = 8 << 20
	page := unix.Getpagesize()
	for _, tc := range []struct {
		name  string
		fake  func(addrs []uintptr, nodes []int32) error
		want  string
		first bool // check that the sample holds the first and last page
	}{
		{"last page elsewhere", func(addrs []uintptr, nodes []int32) error {
			for i := range nodes {
				nodes[i] = 0
			}
			nodes[len(nodes)-1] = 1
			return nil
		}, "is on node 1", true},
		{"unlocated", func(addrs []uintptr, nodes []int32) error {
			for i := range nodes {
				nodes[i] = -int32(unix.EFAULT)
			}
			return nil
		}, "cannot be located", false},
		{"move_pages fails", func(addrs []uintptr, nodes []int32) error { return unix.ENOSYS }, "move_pages", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sampled []uintptr
			pageNodes = func(addrs []uintptr, nodes []int32) error {
				sampled = append([]uintptr(nil), addrs...)
				return tc.fake(addrs, nodes)
			}
			for _, ctor := range []func(int, Options) (*Region, error){Map, Alloc} {
				r, err := ctor(size, Options{BindNUMA: true, NUMANode: 0})
				if errors.Is(err, ErrLockLimit) {
					continue
				}
				if r != nil || !errors.Is(err, ErrNUMA) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("region %v, error %v; want ErrNUMA saying %q", r, err, tc.want)
				}
				if tc.first && (len(sampled) != numaSamples || sampled[len(sampled)-1]-sampled[0] != uintptr(size-page)) {
					t.Fatalf("sampled %d pages spanning %d bytes, want %d spanning the region", len(sampled), sampled[len(sampled)-1]-sampled[0], numaSamples)
				}
			}
		})
	}
	pageNodes = func([]uintptr, []int32) error { t.Fatal("an unbound region was checked"); return nil }
	r, err := Map(size, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.Unmap()
}

// skipWithoutMbind skips where the kernel (or an emulator such as
// qemu-user) does not implement mbind, so that no region can be bound.
func skipWithoutMbind(t *testing.T) {
	t.Helper()
	r, err := Map(1<<20, Options{BindNUMA: true, NUMANode: 0})
	if errors.Is(err, unix.ENOSYS) {
		t.Skipf("mbind is not implemented here (an emulator such as qemu-user): %v", err)
	}
	if err == nil {
		r.Unmap()
	}
}
