// Package testenv is what the library packages' tests share about the
// environment they run in: running a test under a lock limit of its
// choosing in a child process, as an ordinary user's process would, and
// skipping, with the reason, where the environment cannot do what a test
// needs (a lock limit this process may not set, a test binary that cannot
// run itself again, as under qemu-user without binfmt_misc).
package testenv
