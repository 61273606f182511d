//go:build !amd64 && !arm64

package transfer

// cpuRelax does nothing where the package has no pause instruction: the busy wait then only looks
// more often.
func cpuRelax() {}
