package pinpool

import (
	"errors"
	"testing"
	"time"
)

// FuzzOps drives a pool with a random sequence of operations decoded from
// the input and checks its invariants after each: no handle is live twice,
// the budget holds, stats add up, and after Close nothing is left.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0, 0, 0, 0, 3, 3, 3, 3, 7, 8})
	f.Add([]byte{1, 200, 1, 201, 4, 5, 2, 9, 9, 9, 6})
	f.Fuzz(runFuzzOps)
}

func runFuzzOps(t *testing.T, ops []byte) {
	{
		const budget = 16 << 20
		fb := newFake()
		p, err := New(Options{Backend: fb, Budget: budget, MinAvailable: -1, MaxIdle: 3, IdleTimeout: -1})
		if err != nil {
			t.Fatal(err)
		}
		sizes := []int{1, 4096, 4097, 40000, 1 << 20, frame, 9 << 20}
		var live []Buffer
		var dead []Buffer
		var fences []*flagFence
		for i := 0; i < len(ops); i++ {
			arg := 0
			if i+1 < len(ops) {
				arg = int(ops[i+1])
			}
			switch ops[i] % 8 {
			case 0, 1: // TryGet
				b, err := p.TryGet(sizes[arg%len(sizes)])
				if err != nil {
					if !errors.Is(err, ErrBudget) {
						t.Fatalf("TryGet: %v", err)
					}
					continue
				}
				for _, x := range live {
					if x.s == b.s {
						t.Fatal("a live buffer was handed out again")
					}
				}
				live = append(live, b)
			case 2, 3: // Release
				if len(live) > 0 {
					k := arg % len(live)
					if err := live[k].Release(); err != nil {
						t.Fatal(err)
					}
					dead = append(dead, live[k])
					live = append(live[:k], live[k+1:]...)
				}
			case 4: // ReleaseAfter
				if len(live) > 0 {
					k := arg % len(live)
					fe := &flagFence{}
					fences = append(fences, fe)
					if err := live[k].ReleaseAfter(fe); err != nil {
						t.Fatal(err)
					}
					dead = append(dead, live[k])
					live = append(live[:k], live[k+1:]...)
				}
			case 5: // complete fences
				for _, fe := range fences {
					fe.done.Store(true)
				}
				p.pollPending(true)
			case 6: // stale release
				if len(dead) > 0 {
					if err := dead[arg%len(dead)].Release(); !errors.Is(err, ErrReleased) {
						t.Fatalf("stale release: %v", err)
					}
				}
			case 7:
				p.Trim()
			}
			st := p.Stats()
			if st.BytesHeld > budget || st.PeakHeld > budget {
				t.Fatalf("budget exceeded: %+v", st)
			}
			if st.BytesInUse+st.BytesIdle+st.BytesPending+st.BytesRetired != st.BytesHeld {
				t.Fatalf("stats do not add up: %+v", st)
			}
		}
		for _, b := range live {
			b.Release()
		}
		for _, fe := range fences {
			fe.done.Store(true)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			live, _, _, _ := fb.stats()
			if live == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after Close %d bytes are left: %+v", live, p.Stats())
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}
