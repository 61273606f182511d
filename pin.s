// This file is empty on purpose: it lets shard.go declare functions without
// a body that are provided by the runtime through go:linkname.
