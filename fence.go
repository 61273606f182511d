package pinpool

// Fence tells when an asynchronous operation that uses a buffer has
// finished. Buffer.ReleaseAfter takes one: the buffer goes back to the pool
// only once Done reports true. A *cuda.Event recorded on a stream after an
// asynchronous copy is a Fence.
//
// Done must not block. If it returns an error, the pool cannot know whether
// the device still uses the memory, so it retires the buffer: the memory is
// freed once nothing else in its chunk is in use, and never handed out again.
type Fence interface {
	Done() (bool, error)
}

// FenceFunc adapts a function to the Fence interface.
type FenceFunc func() (bool, error)

// Done calls f.
func (f FenceFunc) Done() (bool, error) { return f() }
