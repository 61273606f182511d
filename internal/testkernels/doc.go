// Package testkernels holds the PTX kernels that pinpool's GPU tests, its
// examples and the tool use to check what reached a device: a pattern fill,
// a checksum and a read-bandwidth sum, each with its exact CPU reference
// (FillPattern, Checksum, ReadSum), so that a test can compare the device's
// bytes with the host's without copying them back, and a benchmark can time
// a kernel reading mapped (zero-copy) host memory.
//
// The kernels are hand-written PTX (kernels.ptx, PTX ISA 7.0 for sm_50, so
// that drivers from CUDA 11.4 on load them), embedded in the binary and
// loaded at run time through the cuda package's module API; kernels.cu is
// their readable CUDA C form, compiled on a GPU host as a check
// (scripts/gpu-run.sh). The package is internal: it is test equipment, not
// part of pinpool's API.
package testkernels
