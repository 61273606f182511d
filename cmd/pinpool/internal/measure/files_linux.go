package measure

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropPageCache asks the kernel to drop f's pages from the page cache (they
// are clean: f was synced), so that the next read comes from the disk.
func dropPageCache(f *os.File) error {
	if err := f.Sync(); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
