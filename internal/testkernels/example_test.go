package testkernels_test

import (
	"fmt"

	"github.com/pinpool/pinpool/internal/testkernels"
)

// Checksum is the CPU reference of the pinpool_checksum kernel: tests
// compare the two to check data on the device. It needs no GPU.
func ExampleChecksum() {
	b := make([]byte, 4096)
	testkernels.FillPattern(b, 7) // what the pinpool_fill kernel writes with seed 7
	fmt.Printf("%#x\n", testkernels.Checksum(b))
	b[100]++
	fmt.Printf("%#x\n", testkernels.Checksum(b))
	// Output:
	// 0xa48dfe57980c0592
	// 0x72398acd51247dc7
}
