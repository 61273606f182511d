// This file is empty on purpose: it lets proccache.go declare functions
// without a body (runtimeProcPin, runtimeProcUnpin) that the runtime
// provides through go:linkname.
