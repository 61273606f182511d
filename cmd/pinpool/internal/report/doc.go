// Package report renders the results of `pinpool bench` (a
// *measure.Report) for people and for tools.
//
// WriteTable prints aligned tables for a terminal; WriteJSON writes the
// report itself as indented JSON, which reads back into an equal
// measure.Report; WriteCSV writes one flat CSV table with a row per
// measurement; WriteGoBench writes the Go benchmark format, so that
// benchstat can compare two runs; Plot draws transfer bandwidth against
// transfer size as a PNG or SVG image.
//
// Sizes are shown in binary units (4 KiB, 1 MiB, 1 GiB), bandwidth in
// 10⁹ bytes per second (GB/s), times in ns, µs or ms as they fit. Every
// error this package returns begins with "report: ".
package report
