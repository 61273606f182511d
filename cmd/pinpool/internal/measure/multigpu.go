package measure

import (
	"context"
	"fmt"
	"slices"

	"github.com/pinpool/pinpool/internal/units"
)

// allKinds are the kinds measured on every device at once: pinned and
// staged (the pool's buffers and the copier), where the plan has them.
func (p Plan) allKinds() []Kind {
	return slices.DeleteFunc(slices.Clone(p.Kinds), func(k Kind) bool { return k != Pinned && k != Staged })
}

// allDirections are the directions measured on every device at once.
func (p Plan) allDirections() []Direction {
	return slices.DeleteFunc(slices.Clone(p.Directions), func(d Direction) bool { return d == Both })
}

// allAtOnce measures, with more than one device, the pinned and staged
// transfers of every size on all devices at once: each device moves size
// bytes in the direction, all starting together; the row's time is the
// wall time until the last one finishes, and its rate the bytes of all
// devices over that time (Device AllDevices). This is the host's
// aggregate: the link of each device, and what the host's memory and
// cores can feed them together.
func allAtOnce(ctx context.Context, gpus []*gpu, r *Report, prog *progress) error {
	if len(gpus) < 2 {
		return nil
	}
	p := gpus[0].p
	rows := len(p.allDirections()) * len(p.Sizes)
	for _, k := range p.allKinds() {
		movers := make([]*mover, len(gpus))
		var err error
		for i, g := range gpus {
			if movers[i], err = g.moverFor(k); err != nil {
				break
			}
		}
		if err != nil {
			r.Skipped = append(r.Skipped, fmt.Sprintf("%s on all devices at once: %v", k, err))
			for range rows {
				prog.step("%s on all devices skipped", k)
			}
		} else {
			for _, d := range p.allDirections() {
				for _, size := range p.Sizes {
					if err := ctx.Err(); err != nil {
						freeMovers(movers)
						return err
					}
					t, err := allRow(gpus, movers, k, d, size)
					if err != nil {
						r.Skipped = append(r.Skipped, fmt.Sprintf("%s %s %d bytes on all devices at once: %v", k, d, size, err))
					} else {
						r.Transfers = append(r.Transfers, t)
					}
					prog.step("transfer %s %s %s on %d devices at once", k, d, units.Size(size), len(gpus))
				}
			}
		}
		freeMovers(movers)
	}
	return nil
}

func freeMovers(ms []*mover) {
	for _, m := range ms {
		if m != nil {
			m.free()
		}
	}
}

// allRow measures one row on every device at once, with one goroutine per
// device that stays up between repeats (lockstep).
func allRow(gpus []*gpu, movers []*mover, k Kind, d Direction, size int64) (Transfer, error) {
	p := gpus[0].p
	rotors := make([]*rotor, len(gpus))
	for i := range gpus {
		rotors[i] = newRotor(size, p.arenaSize())
	}
	round, stop := lockstep(len(gpus), func(i int) error {
		g, m := gpus[i], movers[i]
		err := m.one(d, g.s1, g.devFor(d), rotors[i].offset(), size)
		if err == nil && m.timer != timerWall {
			err = g.s1.Synchronize()
		}
		return err
	})
	defer stop()
	s, err := p.collect(round)
	if err != nil {
		return Transfer{}, err
	}
	t := transferRow(k, d, size, s, timerWall, p.MinRepeats)
	t.Device = AllDevices
	t.GBps = gbps(int64(len(gpus))*t.Bytes(), t.Median)
	return t, nil
}
