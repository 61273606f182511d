package cuda

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// EnvLibrary names an environment variable that, when set, replaces the
// library search with this one path (or file name). Tests use it to check
// the no-driver path on a GPU machine.
const EnvLibrary = "PINPOOL_LIBCUDA"

// libraryNames and libraryDirs are searched in order: the plain names first,
// so that the dynamic loader's own configuration wins, then the folders where
// drivers are usually installed (containers, Debian and Ubuntu on x86-64 and
// Jetson, WSL).
var (
	libraryNames = []string{"libcuda.so.1", "libcuda.so"}
	libraryDirs  = []string{
		"/usr/local/nvidia/lib64",
		"/usr/lib/x86_64-linux-gnu",
		"/usr/lib/aarch64-linux-gnu",
		"/usr/lib/aarch64-linux-gnu/tegra",
		"/usr/lib64",
		"/usr/lib/wsl/lib",
	}
)

var loaded struct {
	once sync.Once
	err  error
	path string
}

// Load finds libcuda, looks up its functions and calls cuInit, once; later
// calls return the first call's result. It returns an error wrapping
// ErrNoDriver when no usable driver is present (no library, a stub library,
// missing required functions, or cuInit failing with no device), never
// panics, and is called by every function of the package that needs the
// driver, so calling it first is optional.
func Load() error {
	loaded.once.Do(func() { loaded.path, loaded.err = load() })
	return loaded.err
}

// LibraryPath is the path or name of the driver library that Load opened, or
// "" when none was loaded.
func LibraryPath() string {
	if Load() != nil {
		return ""
	}
	return loaded.path
}

// candidates lists the library names to try, in order.
func candidates() []string {
	if p := os.Getenv(EnvLibrary); p != "" {
		return []string{p}
	}
	c := append([]string(nil), libraryNames...)
	for _, d := range libraryDirs {
		for _, n := range libraryNames {
			c = append(c, d+"/"+n)
		}
	}
	return c
}

func load() (string, error) {
	var tried []string
	for _, name := range candidates() {
		h, err := openLibrary(name)
		if err != nil {
			tried = append(tried, err.Error())
			continue
		}
		if err := bindSymbols(h); err != nil {
			closeLibrary(h)
			return "", fmt.Errorf("%w: %s: %v", ErrNoDriver, name, err)
		}
		if r := invoke(fn.cuInit, 0); r != Success {
			err := resultErr("cuInit", r)
			closeLibrary(h)
			clearSymbols()
			return "", fmt.Errorf("%w: %s: %w", ErrNoDriver, name, err)
		}
		return name, nil
	}
	return "", &notFoundError{tried: tried}
}

// notFoundError is Load's error when no candidate library could be
// opened: errors.Is matches ErrNoDriver.
type notFoundError struct{ tried []string }

func (e *notFoundError) Error() string {
	return fmt.Sprintf("%v (tried %d places; set %s to a path): %s", ErrNoDriver, len(e.tried), EnvLibrary, firstOf(e.tried))
}

func (e *notFoundError) Is(target error) bool { return target == ErrNoDriver }

// NoGPUReason says in a few words why err (for which IsNoDriver holds)
// means no GPU, for a one-line notice: "libcuda.so.1 not found; set
// PINPOOL_LIBCUDA to its path", "no CUDA device", or the error itself. The full
// error, with every place tried, is for verbose output.
func NoGPUReason(err error) string {
	var nf *notFoundError
	switch {
	case errors.As(err, &nf):
		return fmt.Sprintf("%s not found; set %s to its path", libraryNames[0], EnvLibrary)
	case errors.Is(err, ErrNoDevice):
		return "no CUDA device"
	case err == nil:
		return ""
	}
	return err.Error()
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return "nothing to try"
	}
	return s[0]
}

// bindSymbols looks up every symbol in h; a missing required one is an error,
// a missing optional one leaves its address zero.
func bindSymbols(h uintptr) error {
	var missing []string
	for _, s := range symbols {
		a := lookupSymbol(h, s.name)
		if a == 0 && s.fallback != "" {
			a = lookupSymbol(h, s.fallback)
		}
		*s.addr = a
		if a == 0 && !s.optional {
			missing = append(missing, s.name)
		}
	}
	if len(missing) > 0 {
		clearSymbols()
		return fmt.Errorf("driver lacks required functions %v", missing)
	}
	return nil
}

func clearSymbols() {
	for _, s := range symbols {
		*s.addr = 0
	}
}

// need returns ErrMissingSymbol, naming the function, when the driver lacks
// the optional function at addr; nil otherwise.
func need(addr uintptr, name string) error {
	if err := Load(); err != nil {
		return err
	}
	if addr == 0 {
		return fmt.Errorf("%w: %s", ErrMissingSymbol, name)
	}
	return nil
}

// IsNoDriver reports whether err means that no CUDA driver or device is
// available, the condition under which callers fall back to host memory and
// GPU tests skip.
func IsNoDriver(err error) bool {
	return errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice)
}
