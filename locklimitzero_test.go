package pinpool

import (
	"errors"
	"strings"
	"testing"

	"github.com/pinpool/pinpool/hostmem"
)

// lockBoundFake is a fake backend that RLIMIT_MEMLOCK bounds to allowance
// bytes.
type lockBoundFake struct {
	*fakeBackend
	allowance int64
}

func (f lockBoundFake) LockAllowance() (int64, bool) { return f.allowance, true }

// TestLockLimitZero: a limit that allows no locking (ulimit -l 0) shows as
// 0 in Stats and in the refusal, not as the 1-byte budget that stands for
// it. Before, Stats.LockLimit was 1 and the error said "(1 bytes)".
func TestLockLimitZero(t *testing.T) {
	for _, allowance := range []int64{0, 64 << 10} {
		p, err := New(Options{Backend: lockBoundFake{newFake(), allowance}, MinAvailable: -1})
		if err != nil {
			t.Fatal(err)
		}
		st := p.Stats()
		if !st.LockLimited || st.LockLimit != allowance || st.Budget != 0 {
			t.Errorf("allowance %d: Stats LockLimited %v, LockLimit %d, Budget %d", allowance, st.LockLimited, st.LockLimit, st.Budget)
		}
		_, err = p.TryGet(1 << 20)
		if !errors.Is(err, ErrBudget) || !errors.Is(err, hostmem.ErrLockLimit) {
			t.Errorf("allowance %d: TryGet of 1 MiB: %v, want ErrBudget and ErrLockLimit", allowance, err)
		} else if want := "(" + map[int64]string{0: "0", 64 << 10: "65536"}[allowance] + " bytes)"; !strings.Contains(err.Error(), want) {
			t.Errorf("allowance %d: %q lacks %q", allowance, err, want)
		}
		p.Close()
	}
	p, _ := newTestPool(t, Options{})
	if st := p.Stats(); st.LockLimited || st.LockLimit != 0 {
		t.Errorf("a backend without a lock limit: LockLimited %v, LockLimit %d", st.LockLimited, st.LockLimit)
	}
}
