package transfer

import (
	"sync"
	"sync/atomic"
)

// runState is what the lanes of one staged transfer share on both paths
// (chunked and cooperative): the first error, the flag that stops them,
// and the crew lanes that joined.
type runState struct {
	stop atomic.Bool

	mu     sync.Mutex
	err    error
	closed bool           // no lane may join any more
	joined sync.WaitGroup // crew lanes that joined
}

// fail records err (the first one wins) and stops the transfer.
func (s *runState) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.stop.Store(true)
}

// joinLane runs lane on a crew goroutine, unless the transfer's caller has
// already finished its own lane (then every chunk or slice is claimed, and
// the offer is stale).
func (s *runState) joinLane(lane func()) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.joined.Add(1)
	s.mu.Unlock()
	defer s.joined.Done()
	lane()
}

// endJoins stops crew lanes from joining and waits for those that did.
func (s *runState) endJoins() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.joined.Wait()
}
