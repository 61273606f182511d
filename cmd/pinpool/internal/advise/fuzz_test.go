package advise

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// source supplies the choices of randomReport: fuzz bytes or a PRNG.
type source interface {
	intn(n int) int // in [0, n)
	float() float64 // in [0, 1)
}

type byteSource struct{ b []byte }

func (s *byteSource) next() uint64 {
	var buf [8]byte
	n := copy(buf[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}
func (s *byteSource) intn(n int) int { return int(s.next() % uint64(n)) }
func (s *byteSource) float() float64 { return float64(s.next()>>11) / (1 << 53) }

type randSource struct{ r *rand.Rand }

func (s randSource) intn(n int) int { return s.r.IntN(n) }
func (s randSource) float() float64 { return s.r.Float64() }

// pick returns one of xs.
func pick[T any](s source, xs ...T) T { return xs[s.intn(len(xs))] }

// badFloat returns a figure that is often missing or absurd: zero,
// negative, NaN, infinite, tiny, huge, or a plausible value.
func badFloat(s source) float64 {
	switch s.intn(12) {
	case 0:
		return 0
	case 1:
		return -1 - 100*s.float()
	case 2:
		return math.NaN()
	case 3:
		return pick(s, math.Inf(1), math.Inf(-1))
	case 4:
		return pick(s, math.SmallestNonzeroFloat64, 1e-300, math.MaxFloat64, 1e300)
	}
	return math.Exp(s.float()*12 - 4) // 0.018 to 3000
}

// badDuration returns a duration that is often zero, negative or extreme.
func badDuration(s source) time.Duration {
	switch s.intn(8) {
	case 0:
		return 0
	case 1:
		return -time.Duration(s.intn(1e9))
	case 2:
		return pick(s, time.Duration(1), time.Duration(math.MaxInt64))
	}
	return time.Duration(math.Exp(s.float() * 25))
}

// badSize returns a size that is often zero, negative, odd or huge.
func badSize(s source) int64 {
	switch s.intn(8) {
	case 0:
		return pick(s, int64(0), int64(-4096), int64(1), int64(math.MaxInt64), int64(3110400))
	}
	return int64(4096) << s.intn(19) // 4 KiB to 1 GiB
}

// randomReport builds a report of random rows, many of them invalid.
func randomReport(s source) *measure.Report {
	r := &measure.Report{Machine: measure.Machine{
		GPU:              pick(s, "", "GPU"),
		Integrated:       s.intn(4) == 0,
		CanMapHostMemory: s.intn(3) > 0,
	}}
	if s.intn(5) == 0 {
		r.Machine.NoGPU = "no CUDA driver"
	}
	kinds := append([]measure.Kind{"bogus"}, measure.Kinds...)
	dirs := append([]measure.Direction{"sideways"}, measure.Directions...)
	for range s.intn(120) {
		r.Transfers = append(r.Transfers, measure.Transfer{
			Kind: pick(s, kinds...), Dir: pick(s, dirs...), Size: badSize(s),
			Median: badDuration(s), GBps: badFloat(s), Repeats: s.intn(3),
		})
	}
	ops := []string{"bogus", measure.OpHostAlloc, measure.OpFreeHost, measure.OpRegister, measure.OpUnregister,
		measure.OpPoolHit, measure.OpMmapLock, measure.OpMunmap}
	for range s.intn(40) {
		r.Allocs = append(r.Allocs, measure.Alloc{Op: pick(s, ops...), Size: badSize(s), Median: badDuration(s)})
	}
	for range s.intn(20) {
		r.Pool = append(r.Pool, measure.PoolRun{
			Impl: pick(s, measure.ImplPinpool, measure.ImplSeed, "other"), Goroutines: pick(s, -1, 0, 1, 2, 16, math.MaxInt),
			Ops: int64(s.intn(1e9)) - 10, Elapsed: badDuration(s), OpsPerSec: badFloat(s), NsPerOp: badFloat(s),
		})
	}
	if s.intn(2) == 0 {
		r.Skipped = append(r.Skipped, pick(s, "mapped: the device cannot map host memory", "staged: --quick", "pool: not built"))
	}
	return r
}

// checkReport runs Advise, Write and WriteJSON on r and fails on a panic,
// an error, an empty line or a figure that is not finite.
func checkReport(t *testing.T, r *measure.Report) {
	t.Helper()
	adv := Advise(r)
	if len(adv) == 0 {
		t.Fatal("no advice")
	}
	checkText(t, adv)
	for _, a := range adv {
		if a.Topic == "" || a.Advice == "" || a.Evidence == "" {
			t.Errorf("empty field: %+v", a)
		}
	}
	var b bytes.Buffer
	if err := Write(&b, adv); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&b, adv); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b.Bytes(), []byte("NaN")) || bytes.Contains(b.Bytes(), []byte("Inf")) {
		t.Errorf("NaN or Inf in output:\n%s", b.String())
	}
	if t.Failed() {
		t.Logf("report: %+v", *r)
	}
}

func TestRandomReports(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		checkReport(t, randomReport(randSource{rng}))
		if t.Failed() {
			return
		}
	}
}

func FuzzAdvise(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("pinned pageable staged mapped 0123456789abcdef"))
	f.Add(bytes.Repeat([]byte{0xff, 0x00, 0x7f, 0x80, 0x01}, 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkReport(t, randomReport(&byteSource{b: data}))
	})
}
