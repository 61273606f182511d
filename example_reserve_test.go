package pinpool_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/hostmem"
)

// A large reservation, cancelled when it takes too long, with its progress
// shown. The buffers of each allocation made are usable at once; a
// cancelled Reserve keeps nothing no Get took.
func ExamplePool_ReserveContext() {
	p, err := pinpool.New(pinpool.Options{Backend: pinpool.NewHostBackend(hostmem.Options{})})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var last int64
	err = p.ReserveContext(ctx, 8<<10, 4, func(made, total int64) { // small: fits a 64 KiB lock limit
		last = made // e.g. a progress bar: made of total bytes
	})
	if err != nil {
		log.Fatal(err) // ErrBudget under RLIMIT_MEMLOCK; context.DeadlineExceeded after a minute
	}
	fmt.Println(last >= 32<<10, p.Stats().BytesIdle >= 32<<10) // small sizes come from larger slabs
	// Output: true true
}
