package transfer

import "testing"

// frameBytes is one 1080p NV12 frame of the seed article (1920×1080, 12
// bits a pixel): 3,110,400 bytes.
const frameBytes = 1920 * 1080 * 3 / 2

// namedCopier is a copier that BenchmarkStagedSizes compares, at sizes
// up to upTo (0: every size), in direction only (both when bothWays).
type namedCopier struct {
	name     string
	c        *Copier
	upTo     int
	only     Direction
	bothWays bool
}

// shapeCopiers are the copiers BenchmarkStagedSizes compares: the default
// staging plan (DirectBelow off, so that every size is staged), and
// variants of its tuning measured against it in the same run, at the sizes
// and in the direction where they differ from it.
func shapeCopiers(b *testing.B, g *gpu) []namedCopier {
	opt := Options{DirectBelow: -1, Prewarm: true}
	allLanes := defaultTuning()
	allLanes.coldLanes = [2]int{}
	handoffOff := defaultTuning()
	handoffOff.handoff = false
	return []namedCopier{
		{name: "plan=default", c: g.tunedCopier(b, opt, defaultTuning()), bothWays: true},
		{name: "plan=all-lanes-asleep", c: g.tunedCopier(b, opt, allLanes), upTo: 32 << 20, bothWays: true},
		{name: "plan=chunked-only", c: g.tunedCopier(b, opt, chunkedOnly()), upTo: 32 << 20, bothWays: true},
		{name: "plan=handoff-off", c: g.tunedCopier(b, opt, handoffOff), upTo: 16 << 20, only: DeviceToHost},
	}
}

// tunedCopier is g.copier with tuning tu.
func (g *gpu) tunedCopier(tb testing.TB, opt Options, tu tuning) *Copier {
	tb.Helper()
	return g.copierOn(tb, cudaDevice{g.ctx}, opt, tu)
}

// frameWays are the ways BenchmarkFrameStream compares: the driver's copy, the default copier, one
// that wakes all its lanes for a frame that finds them asleep (tuning.coldLanes off), one in the
// chunked mode only, a copier of 2 lanes, one whose downloads do not hand off (tuning.handoff off),
// and one that never spins.
var frameWays = []frameWay{
	{name: "driver"},
	{name: "copier=default", copier: tunedFrameCopier(Options{}, nil)},
	{name: "copier=all-lanes-asleep", copier: tunedFrameCopier(Options{}, func(t *tuning) { t.coldLanes = [2]int{} })},
	{name: "copier=chunked-only", copier: tunedFrameCopier(Options{}, func(t *tuning) { t.coopShare = [2]int{} })},
	{name: "copier=lanes-2", copier: tunedFrameCopier(Options{Lanes: 2}, nil)},
	{name: "copier=handoff-off", copier: tunedFrameCopier(Options{}, func(t *tuning) { t.handoff = false })},
	{name: "copier=spin-off", copier: tunedFrameCopier(Options{LaneSpin: -1}, nil)},
}

// pacedWays are the ways BenchmarkPacedFrames compares, frame by frame in one stream: the driver's
// copy, the default copier, copiers whose frames that find the lanes asleep take 2 to 6 lanes
// both ways, or all of them (tuning.coldLanes), so that one run on the GPU host picks the default
// for each direction, and one that asks the driver whether every frame is pinned
// (tuning.pageableFor zero); then the Go references (goRefWays).
var pacedWays = append([]frameWay{
	{name: "driver"},
	{name: "copier=default", copier: tunedFrameCopier(Options{}, nil)},
	{name: "copier=cold-2", copier: coldLanesCopier(2)},
	{name: "copier=cold-3", copier: coldLanesCopier(3)},
	{name: "copier=cold-4", copier: coldLanesCopier(4)},
	{name: "copier=cold-5", copier: coldLanesCopier(5)},
	{name: "copier=cold-6", copier: coldLanesCopier(6)},
	{name: "copier=cold-all", copier: coldLanesCopier(0)},
	{name: "copier=ask-always", copier: tunedFrameCopier(Options{}, func(t *tuning) { t.pageableFor = 0 })},
}, goRefWays...)

// coldLanesCopier makes a prewarmed copier of the default tuning but for coldLanes, n both ways
// (zero: all lanes).
func coldLanesCopier(n int) func(testing.TB, *gpu) *Copier {
	return tunedFrameCopier(Options{}, func(t *tuning) { t.coldLanes = [2]int{n, n} })
}

// tunedFrameCopier makes a prewarmed copier with options opt and the
// default tuning changed by tune (when not nil).
func tunedFrameCopier(opt Options, tune func(*tuning)) func(testing.TB, *gpu) *Copier {
	return func(tb testing.TB, g *gpu) *Copier {
		tu := defaultTuning()
		if tune != nil {
			tune(&tu)
		}
		opt.Prewarm = true
		return g.tunedCopier(tb, opt, tu)
	}
}
