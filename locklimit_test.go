package pinpool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pinpool/pinpool/hostmem"
	"github.com/pinpool/pinpool/internal/testenv"
)

// TestPoolUnderLockLimit runs a pool on the host backend as a user without
// CAP_IPC_LOCK under the default RLIMIT_MEMLOCK of 8 MiB would: in a child
// process that lowers the limit and drops the capability (even when the
// tests run as root). The pool must know the limit at New and keep within
// it like a budget: a request larger than the limit fails at once, one
// that does not fit now fails (TryGet) or waits (Get) instead of failing
// in mlock, and both errors are one sentence naming RLIMIT_MEMLOCK, the
// limit and the fix. Before, 491 of the 2000 gets of `pinpool stress`
// failed this way as an ordinary user.
func TestPoolUnderLockLimit(t *testing.T) {
	const limit = 8 << 20
	if !testenv.UnderLimit(t, limit) {
		return
	}
	p, err := New(Options{Backend: NewHostBackend(hostmem.Options{}), MinAvailable: -1, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	if ll := p.Stats().LockLimit; ll <= 0 || ll > limit {
		t.Fatalf("Stats.LockLimit = %d, want the allowance under %d", ll, limit)
	}
	oneSentence := func(err error) {
		t.Helper()
		msg := err.Error()
		if !errors.Is(err, ErrBudget) || !errors.Is(err, hostmem.ErrLockLimit) || errors.Is(err, ErrGrow) {
			t.Fatalf("%v: want ErrBudget and hostmem.ErrLockLimit, not ErrGrow", err)
		}
		for _, want := range []string{"RLIMIT_MEMLOCK", hostmem.LockLimitHint(), "CAP_IPC_LOCK"} { // the hint that fits this process's hard limit
			if !strings.Contains(msg, want) {
				t.Fatalf("%q lacks %q", msg, want)
			}
		}
		if strings.Count(msg, "pinpool:") != 1 || strings.Count(msg, ". ") > 0 {
			t.Fatalf("%q is not one sentence", msg)
		}
	}
	never, cancel := context.WithTimeout(context.Background(), time.Minute)
	_, err = p.Get(never, 16<<20)
	cancel()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get(16 MiB) under an 8 MiB limit: %v, want an error at once, not after waiting for room", err)
	}
	oneSentence(err)
	a := mustGet(t, p, 3<<20)
	b := mustGet(t, p, 3<<20)
	_, err = p.TryGet(3 << 20)
	if err == nil {
		t.Fatal("a third 3 MiB buffer under an 8 MiB limit")
	}
	oneSentence(err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = p.Get(ctx, 3<<20)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrBudget) {
		t.Fatalf("Get that must wait for room: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		c, err := p.Get(context.Background(), 3<<20)
		if err == nil {
			c.Release()
		}
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	a.Release()
	if err := <-done; err != nil {
		t.Fatalf("a waiting Get after a release: %v", err)
	}
	b.Release()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := hostmem.LockedBytes(); err != nil || n != 0 {
		t.Fatalf("VmLck %d after Close (%v)", n, err)
	}
}
