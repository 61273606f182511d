package multigpu

import (
	"fmt"

	"github.com/pinpool/pinpool/transfer"
)

// Options configure a Set. The zero value is ready to use: a shared pool
// with no budget, copiers with transfer's defaults and their lanes from the
// placement, the host's NUMA layout read from the system, and each
// device's staging bound to its node where Place allows it.
type Options struct {
	// Budget caps the bytes of the shared pool (Set.Pool), as
	// pinpool.Options.Budget: Get waits while a request would exceed it.
	// Zero means no cap; otherwise at least 4096. The staging pools are
	// not counted: each holds its copier's window (Transfer.WindowBytes,
	// 32 MiB by default), and a second one while the copier moves data
	// both ways at once (transfer.Options.WindowBytes), and no more.
	Budget int64

	// Transfer is the template of every copier's options. Zero fields take
	// transfer's defaults, except Lanes: zero means the placement's lane
	// count for the device (Placement.Lanes), a positive value is used
	// for every copier as is. Prewarm is always set: Open allocates (and
	// binds) one staging window of each copier at once, so that a device
	// that cannot pin or bind it fails Open, not the first copy.
	Transfer transfer.Options

	// Host describes the host's NUMA nodes for the placement. Nil means
	// ReadHost(). Tests pass a recorded host here.
	Host *Host

	// NoNUMABind leaves every staging pool unbound (the kernel's first-touch
	// policy places it), whatever the devices report; lanes are still
	// shared by node.
	NoNUMABind bool
}

// window is the staging window of one copier in one direction: the
// number of staging buffers and their size, from the template with
// transfer's defaults filled in by transfer itself
// (transfer.Options.Defaults). It is zero for a template that check
// refuses.
func (o Options) window() (slots, chunk int) {
	t, err := o.Transfer.Defaults()
	if err != nil {
		return 0, 0
	}
	return t.Slots(), t.ChunkSize
}

// check validates the options before Open sizes anything from them; the
// Transfer template is checked by transfer's own rules
// (transfer.Options.Defaults), the ones transfer.New applies.
func (o Options) check() error {
	if o.Budget < 0 {
		return fmt.Errorf("%w: Budget = %d", ErrInvalidOptions, o.Budget)
	}
	if _, err := o.Transfer.Defaults(); err != nil {
		return fmt.Errorf("%w: Transfer: %w", ErrInvalidOptions, err)
	}
	return nil
}
