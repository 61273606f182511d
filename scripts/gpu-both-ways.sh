#!/usr/bin/env bash
# Staged transfers both ways at once (issue 17), in one call of the device
# tool: the engine before this change ("base") beside the engine with a
# window and standing lanes per direction, in the same run:
#   - the GPU tests of transfer and multigpu (new engine);
#   - BenchmarkBothWays, base and new alternating, three rounds: one copier
#     both ways, a copier per direction, each direction alone, pinned;
#   - pinpool bench both ways (staged, pinned, pageable), base and new;
#   - one direction at a time, to show it did not change: BenchmarkTransfer
#     staged 64 and 256 MiB, and BenchmarkFrameStream, base and new;
#   - BenchmarkPacedFrames, the driver's copy and the new engine, each in a
#     process of its own, two rounds.
# Binaries from this machine (no Go toolchain there), stripped so that they
# fit the tool's carry limit:
#
#   d=.gpu/both; flags='-ldflags=-s -w'
#   CGO_ENABLED=0 go test -c "$flags" -o $d/transfer.test ./transfer
#   CGO_ENABLED=0 go test -c "$flags" -o $d/multigpu.test ./multigpu
#   CGO_ENABLED=0 go build "$flags" -o $d/pinpool ./cmd/pinpool
#   and base-transfer.test, base-pinpool the same way from the base commit
#   (with transfer/bothways_bench_test.go copied in).
#   run: bash scripts/gpu-both-ways.sh   (carry .gpu/both; logs in $OUT)
#
# docs/results/2026-12-01-both-ways.md describes a run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
d=.gpu/both
status=0
. scripts/machine-info.sh
machine_info "$d"/* >"$out/machine.txt" 2>&1
t0=$(date +%s)
gpu_tests "$d" "$out/tests.txt" || status=1
step tests
for round in 1 2 3; do
	for e in base-transfer.test transfer.test; do
		echo "## $e round $round" >>"$out/both-ways.txt"
		"$d/$e" -test.run '^$' -test.bench 'BothWays' -test.benchtime 20x >>"$out/both-ways.txt" 2>&1 || status=1
	done
done
step both-ways
for e in base-pinpool pinpool; do
	echo "## $e" >>"$out/bench.txt"
	"$d/$e" bench --sizes 16MiB,64MiB,256MiB --kinds pageable,pinned,staged --directions H2D,D2H,both --repeats 5 >>"$out/bench.txt" 2>&1 || status=1
done
step bench
for round in 1 2; do
	for e in base-transfer.test transfer.test; do
		echo "## $e round $round" >>"$out/one-way.txt"
		"$d/$e" -test.run '^$' -test.bench 'Transfer/(64MiB|256MiB)/staged/' -test.benchtime 1s >>"$out/one-way.txt" 2>&1 || status=1
		"$d/$e" -test.run '^$' -test.bench 'FrameStream/(driver|copier=default)/' -test.benchtime 0.4s >>"$out/one-way.txt" 2>&1 || status=1
	done
done
step one-way
# The paced stream's CPU time (issue 17's goal 6), each engine in a process
# of its own beside the driver's copy.
for round in 1 2; do
	for b in 'PacedFrames/driver/' 'PacedFrames/copier=default/'; do
		"$d/transfer.test" -test.run '^$' -test.bench "$b" -test.benchtime 1x >>"$out/paced-alone.txt" 2>&1 || status=1
	done
done
step paced
exit $status
