//go:build !linux

package measure

import (
	"errors"
	"os"
)

// dropPageCache is not available here: the file benchmark has no cold rows.
func dropPageCache(f *os.File) error { return errors.New("not supported on this system") }
