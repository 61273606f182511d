#!/usr/bin/env bash
# The bound of a staged host-to-device copy on the GPU host (issue 17's
# 45 GB/s from 64 MiB), in one call of the device tool:
#   - the GPU tests of transfer and multigpu;
#   - scripts/ref/staged.cpp, compiled there with nvcc: the staged copy of
#     pageable memory at its best in C++, a sweep of threads, chunk,
#     window, store, batches and demotion, then the best five and the Go
#     engine's defaults in three rounds beside the pinned copy;
#   - BenchmarkStagedTrace, the Go engine at 64 and 256 MiB, three rounds;
#   - PyTorch moving a pageable CPU tensor to the GPU
#     (scripts/ref/torch_h2d.py);
#   - pinpool bench as user nobody with an 8 MiB memlock limit.
# Binaries from this machine (no Go toolchain there):
#
#   d=.gpu/bound; flags='-ldflags=-s -w'
#   CGO_ENABLED=0 go test -c "$flags" -o $d/transfer.test ./transfer
#   CGO_ENABLED=0 go test -c "$flags" -o $d/multigpu.test ./multigpu
#   CGO_ENABLED=0 go build "$flags" -o $d/pinpool ./cmd/pinpool
#   run: bash scripts/gpu-staged-bound.sh   (carry .gpu/bound; logs in $OUT)
#
# With the argument "focus" it runs only the C++ program's fixed finalists
# (the Go engine's defaults among them) and BenchmarkStagedTrace,
# alternating, three rounds of two each: the Go engine against the same algorithm
# in C++, side by side.
#
# docs/results/2026-12-01-staged-bound.md describes a run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
d=.gpu/bound
status=0
. scripts/machine-info.sh
machine_info "$d"/*.test "$d/pinpool" >"$out/machine.txt" 2>&1
t0=$(date +%s)
if [ "${1:-grid}" = focus ]; then
	nvcc -O3 -std=c++17 -Xcompiler -O3,-mavx2,-pthread -o /tmp/staged scripts/ref/staged.cpp >"$out/ref-build.txt" 2>&1 || exit 1
	for round in 1 2 3; do
		echo "## round $round" >>"$out/staged.txt"
		/tmp/staged 7 focus 2 >>"$out/staged.txt" 2>&1 || status=1
		"$d/transfer.test" -test.run '^$' -test.bench 'StagedTrace/copier=default/size=(64|256)MiB/H2D' -test.benchtime 20x >>"$out/trace.txt" 2>&1 || status=1
		"$d/transfer.test" -test.run '^$' -test.bench 'StagedTrace/copier=default/size=(64|256)MiB/H2D' -test.benchtime 20x >>"$out/trace.txt" 2>&1 || status=1
	done
	step focus
	exit $status
fi
"$d/transfer.test" -test.run GPU -test.v -test.count 1 -test.timeout 200s >"$out/tests.txt" 2>&1 || status=1
"$d/multigpu.test" -test.run . -test.count 1 -test.timeout 120s >>"$out/tests.txt" 2>&1 || status=1
step tests
if nvcc -O3 -std=c++17 -Xcompiler -O3,-mavx2,-pthread -o /tmp/staged scripts/ref/staged.cpp >"$out/ref-build.txt" 2>&1; then
	/tmp/staged 7 >"$out/staged.txt" 2>&1 || status=1
else
	status=1
fi
step staged
for round in 1 2 3; do
	"$d/transfer.test" -test.run '^$' -test.bench 'StagedTrace/copier=default/size=(64|256)MiB/' -test.benchtime 20x >>"$out/trace.txt" 2>&1 || status=1
done
step trace
python3 scripts/ref/torch_h2d.py 9 >"$out/torch.txt" 2>&1 || status=1
step torch
bench_as_nobody "$d/pinpool" "$out/nobody.txt" || status=1
step nobody
exit $status
