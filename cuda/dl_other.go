//go:build !linux

package cuda

import "errors"

func openLibrary(name string) (uintptr, error) {
	return 0, errors.New("cuda: the driver is loaded on Linux only")
}

func closeLibrary(uintptr) {}

func lookupSymbol(uintptr, string) uintptr { return 0 }
