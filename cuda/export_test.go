package cuda

import "unsafe"

// The driver calls that other code would make on its own (a cgo library,
// another binding), for the interop tests of package cuda_test: they make
// and destroy raw handles that no Stream or Event of this package owns.

func RawStreamCreate(c *Context) (uintptr, error) {
	var h uintptr
	return h, check("cuStreamCreate", c.call(fn.cuStreamCreate, uintptr(unsafe.Pointer(&h)), uintptr(StreamNonBlocking)))
}

func RawEventCreate(c *Context) (uintptr, error) {
	var h uintptr
	return h, check("cuEventCreate", c.call(fn.cuEventCreate, uintptr(unsafe.Pointer(&h)), uintptr(EventDisableTiming)))
}

func RawStreamQuery(c *Context, h uintptr) error {
	return check("cuStreamQuery", c.call(fn.cuStreamQuery, h))
}

func RawEventQuery(c *Context, h uintptr) error {
	return check("cuEventQuery", c.call(fn.cuEventQuery, h))
}

func RawStreamDestroy(c *Context, h uintptr) error {
	return check("cuStreamDestroy", c.call(fn.cuStreamDestroy, h))
}

func RawEventDestroy(c *Context, h uintptr) error {
	return check("cuEventDestroy", c.call(fn.cuEventDestroy, h))
}
