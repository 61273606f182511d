package transfer

import (
	"context"

	"github.com/pinpool/pinpool/cuda"
)

// Transfer is an asynchronous copy started by ToDeviceAsync or
// FromDeviceAsync. It is a pinpool.Fence: a pool buffer whose bytes the
// transfer reads or writes can be released with ReleaseAfter(transfer).
type Transfer struct {
	dir  Direction
	n    int
	done chan struct{}
	err  error
}

// Wait blocks until the transfer has finished and returns its error: nil
// when every byte is in place, an error wrapping ctx.Err() when it was
// cancelled (no chunk is in flight any more then), or a copy error.
func (t *Transfer) Wait() error {
	<-t.done
	return t.err
}

// Done reports, without blocking, whether the transfer has finished, with
// its error once it has (so that a pool retires a buffer released after a
// failed transfer instead of trusting it).
func (t *Transfer) Done() (bool, error) {
	select {
	case <-t.done:
		return true, t.err
	default:
		return false, nil
	}
}

// Direction is the transfer's direction.
func (t *Transfer) Direction() Direction { return t.dir }

// Len is the number of bytes the transfer moves.
func (t *Transfer) Len() int { return t.n }

// ToDeviceAsync starts ToDevice on another goroutine and returns at once.
// src must not be changed until the transfer has finished: staged chunks
// are copied from it while the transfer runs. Cancelling ctx stops issuing
// chunks; Wait then returns an error wrapping ctx.Err() once the chunks in
// flight have completed. Close waits for the transfer.
func (c *Copier) ToDeviceAsync(ctx context.Context, dst cuda.DevicePtr, src []byte) *Transfer {
	return c.start(ctx, op{HostToDevice, dst, src})
}

// FromDeviceAsync starts FromDevice on another goroutine and returns at
// once. dst holds the bytes once Wait has returned nil; it must not be
// read or written before.
func (c *Copier) FromDeviceAsync(ctx context.Context, dst []byte, src cuda.DevicePtr) *Transfer {
	return c.start(ctx, op{DeviceToHost, src, dst})
}

func (c *Copier) start(ctx context.Context, o op) *Transfer {
	t := &Transfer{dir: o.dir, n: len(o.host), done: make(chan struct{})}
	if err := c.begin(); err != nil {
		t.err = err
		close(t.done)
		return t
	}
	go func() {
		defer c.end()
		t.err = c.execute(ctx, o, false)
		close(t.done)
	}()
	return t
}
