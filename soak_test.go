package pinpool

import (
	"os"
	"testing"
)

// envSoak names the environment variable that runs the adversarial and
// stress tests at full length: PINPOOL_SOAK=1 go test -race ./... (about
// a minute for this package on two cores). Without it they run their
// short versions, which keep every case and check at fewer iterations and
// shorter durations, so that the package's tests take well under 20 s
// under -race; -short always picks the short versions.
const envSoak = "PINPOOL_SOAK"

// soak reports whether the long versions run (see envSoak).
func soak() bool { return os.Getenv(envSoak) != "" && !testing.Short() }
