package cuda

import (
	"errors"
	"testing"
)

// wantZeroErr checks the error of a call on a zero Device or Context: the
// driver's absence where there is none, else the given sentinel.
func wantZeroErr(t *testing.T, what string, err error, sentinel error) {
	t.Helper()
	if Load() != nil {
		if !errors.Is(err, ErrNoDriver) {
			t.Errorf("%s = %v, want ErrNoDriver", what, err)
		}
		return
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("%s = %v, want %v", what, err, sentinel)
	}
}

// TestZeroDevice calls every method of the Device that a failed GetDevice
// returns, and of the zero Device: errors, never a panic.
func TestZeroDevice(t *testing.T) {
	failed, err := GetDevice(-1)
	if err == nil {
		t.Fatal("GetDevice(-1) succeeded")
	}
	for name, d := range map[string]Device{"failed GetDevice": failed, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			_, err := d.Name()
			wantZeroErr(t, "Name", err, ErrInvalidDevice)
			_, err = d.TotalMem()
			wantZeroErr(t, "TotalMem", err, ErrInvalidDevice)
			_, err = d.Attribute(AttrIntegrated)
			wantZeroErr(t, "Attribute", err, ErrInvalidDevice)
			_, err = d.Properties()
			wantZeroErr(t, "Properties", err, ErrInvalidDevice)
		})
	}
}

// TestZeroContext uses a zero Context, a nil *Context, and streams, events
// and memory made from them: every call returns an error instead of handing
// a null function or context to the driver (which killed the process with
// SIGSEGV).
func TestZeroContext(t *testing.T) {
	for name, c := range map[string]*Context{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			s := c.DefaultStream()
			wantZeroErr(t, "DefaultStream().Synchronize", s.Synchronize(), ErrInvalidContext)
			_, err := s.Query()
			wantZeroErr(t, "DefaultStream().Query", err, ErrInvalidContext)
			wantZeroErr(t, "DefaultStream().MemsetD8Async", s.MemsetD8Async(0, 1, 16), ErrInvalidContext)
			wantZeroErr(t, "DefaultStream().CopyDtoDAsync", s.CopyDtoDAsync(0, 0, 16), ErrInvalidContext)
			wantZeroErr(t, "Synchronize", c.Synchronize(), ErrInvalidContext)
			wantZeroErr(t, "CopyDtoD", c.CopyDtoD(0, 0, 16), ErrInvalidContext)
			wantZeroErr(t, "CopyHtoD", c.CopyHtoD(0, make([]byte, 16)), ErrInvalidContext)
			wantZeroErr(t, "MemsetD8", c.MemsetD8(0, 1, 16), ErrInvalidContext)
			_, _, err = c.MemGetInfo()
			wantZeroErr(t, "MemGetInfo", err, ErrInvalidContext)
			_, err = c.MemAlloc(16)
			wantZeroErr(t, "MemAlloc", err, ErrInvalidContext)
			_, err = c.HostAlloc(16, 0)
			wantZeroErr(t, "HostAlloc", err, ErrInvalidContext)
			_, err = c.NewStream(StreamNonBlocking)
			wantZeroErr(t, "NewStream", err, ErrInvalidContext)
			_, err = c.NewEvent(EventDisableTiming)
			wantZeroErr(t, "NewEvent", err, ErrInvalidContext)
			_, err = c.LockThread()
			wantZeroErr(t, "LockThread", err, ErrInvalidContext)
			wantZeroErr(t, "Close", c.Close(), ErrInvalidContext)
			if c.Handle() != 0 {
				t.Errorf("Handle = %#x", c.Handle())
			}
			if _, err := c.Device().Name(); err == nil {
				t.Error("Device().Name succeeded")
			}
		})
	}
	var e Event
	_, err := e.Done()
	wantZeroErr(t, "zero Event.Done", err, ErrInvalidContext)
	wantZeroErr(t, "zero Event.Record", e.Record(nil), ErrInvalidContext)
	wantZeroErr(t, "zero Event.Synchronize", e.Synchronize(), ErrInvalidContext)
	var s Stream
	wantZeroErr(t, "zero Stream.Synchronize", s.Synchronize(), ErrInvalidContext)
	var m DeviceMem
	wantZeroErr(t, "zero DeviceMem.Free", m.Free(), ErrInvalidContext)
}
