package cuda

import (
	"errors"
	"testing"
)

// TestWrapDoesNotOwn: Destroy of a wrapped stream or event retires the
// wrapper and never reaches the driver. The context here is a zero one,
// on which every driver call fails: the owned stream's and event's Destroy
// do fail, the wrappers' succeed, and the wrappers are closed afterwards.
func TestWrapDoesNotOwn(t *testing.T) {
	var c Context
	s := c.WrapStream(0x1234)
	if s.Handle() != 0x1234 {
		t.Fatalf("Handle %#x, want 0x1234", s.Handle())
	}
	if err := s.Destroy(); err != nil {
		t.Fatalf("Destroy of a wrapped stream: %v", err)
	}
	if err := s.Destroy(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Destroy: %v, want ErrClosed", err)
	}
	if _, err := s.Query(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Query after Destroy: %v, want ErrClosed", err)
	}
	owned := &Stream{ctx: &c, handle: 0x1234}
	if err := owned.Destroy(); err == nil || errors.Is(err, ErrClosed) {
		t.Fatalf("an owned stream's Destroy: %v, want the driver call's error", err)
	}
	if err := c.WrapStream(0).Destroy(); err == nil {
		t.Fatal("Destroy of the wrapped default stream succeeded")
	}

	e, err := c.WrapEvent(0x5678)
	if err != nil {
		t.Fatal(err)
	}
	var fence interface{ Done() (bool, error) } = e // a pinpool.Fence
	if e.Handle() != 0x5678 {
		t.Fatalf("Handle %#x, want 0x5678", e.Handle())
	}
	if err := e.Destroy(); err != nil {
		t.Fatalf("Destroy of a wrapped event: %v", err)
	}
	if _, err := fence.Done(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Done after Destroy: %v, want ErrClosed", err)
	}
	ownedEv := &Event{ctx: &c, handle: 0x5678}
	if err := ownedEv.Destroy(); err == nil || errors.Is(err, ErrClosed) {
		t.Fatalf("an owned event's Destroy: %v, want the driver call's error", err)
	}
	if _, err := c.WrapEvent(0); !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("WrapEvent(0): %v, want ErrInvalidValue", err)
	}
}
