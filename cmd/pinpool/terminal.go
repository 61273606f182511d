package main

import (
	"io"
	"os"
)

// isTerminal reports whether w is a character device other than /dev/null,
// and TERM is not "dumb": what a terminal is to this tool, for monitor's
// in-place refresh and bench's and advise's progress bar.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}
