// Package advise holds the rules of `pinpool advise`: from one measurement
// report (package measure) it says, for the machine that was measured,
// which host memory to use for which data, and with which options — the
// seed article's per-data-kind policy table, each line resting on figures
// measured on the machine at hand.
//
// Advise reads a *measure.Report and returns one Advice per line; Write
// prints them as aligned text (topic, advice, then the evidence indented
// under it) and WriteJSON as a JSON array.
//
// # Rules
//
// Every threshold is relative (a ratio of two figures of the same report);
// no figure of the reference H200 host is built in.
//
//   - pinned-vs-pageable, per direction (H2D, D2H): the pinned/pageable
//     bandwidth ratio at each size; pinned pays from the smallest size from
//     which the ratio stays at or above 1.2 up to the largest size.
//   - write-combined: the median over sizes of at least 1 MiB of the
//     write-combined/pinned H2D ratio; write-combined memory is advised for
//     upload-only buffers when it is at least 5% faster.
//   - mapped: on an integrated GPU mapped memory is advised for data the GPU
//     reads; on a discrete GPU the kernel reading host memory in place (the
//     mapped H2D row) is compared with the pinned copy at each size; a device
//     that cannot map host memory is told so.
//   - staged, per direction: staged against pageable and pinned at the
//     largest size both were measured; registered: registered against staged
//     at the largest size, for buffers reused many times.
//   - direct-below: where staged becomes faster than pageable (the
//     staged/pageable ratio crosses 1, interpolated on a log scale), the
//     midpoint of both directions on a log scale, rounded to a power of two.
//   - allocation: pinned-allocation cost per GiB (median of the rows of at
//     least 1 MiB) against a pool hit; cuMemHostAlloc against
//     cuMemHostRegister (with their frees) to pick the backend's Method.
//     Without a GPU the host backend's mmap+mlock and munmap rows stand in.
//   - pool: pinpool's Get+Release throughput against the seed design at the
//     largest goroutine count both were measured with, and at 1 goroutine.
//   - options: the option values the rules above recommend, as Go code.
//
// A rule whose data is missing returns an Advice with Measured false that
// says what was not measured (quoting the report's Skipped lines that
// explain it); zero, negative, NaN and infinite figures count as missing.
// With Machine.NoGPU set only the host-side rules (allocation, pool,
// options) apply, after one line that says why the GPU rules were skipped.
package advise
