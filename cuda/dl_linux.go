package cuda

import "github.com/ebitengine/purego"

func openLibrary(name string) (uintptr, error) {
	return purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

func closeLibrary(h uintptr) { _ = purego.Dlclose(h) }

// lookupSymbol returns the address of name in h, or 0. It uses Dlsym rather
// than RegisterLibFunc, which panics on a missing symbol and calls through
// reflection.
func lookupSymbol(h uintptr, name string) uintptr {
	a, err := purego.Dlsym(h, name)
	if err != nil {
		return 0
	}
	return a
}
