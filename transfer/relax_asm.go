//go:build amd64 || arm64

package transfer

// cpuRelax pauses the CPU for a moment in a busy wait (PAUSE on amd64, YIELD on arm64). Implemented
// in relax_$GOARCH.s.
func cpuRelax()
