#!/usr/bin/env bash
# Paced frames both ways (issue 17), in one call of the device tool: the
# engine at the start of the session ("base") beside the engine that evicts
# a device-to-host frame's staging only when its lanes are awake, in the
# same run:
#   - the GPU tests of transfer and multigpu (new engine);
#   - BenchmarkPacedFrames, the driver's copy and the default copier, each
#     engine in a process of its own, alternating, two rounds: uploads
#     only, downloads only, and each frame up and back;
#   - BenchmarkFrameStream device to host and host to device, 1 and 10
#     goroutines, base and new alternating, two rounds.
# Binaries from this machine (no Go toolchain there):
#
#   d=.gpu/paced; flags='-ldflags=-s -w'
#   CGO_ENABLED=0 go test -c "$flags" -o $d/transfer.test ./transfer
#   CGO_ENABLED=0 go test -c "$flags" -o $d/multigpu.test ./multigpu
#   and base-transfer.test the same way from the base commit, with
#   transfer/shape_bench_test.go copied in.
#   run: bash scripts/gpu-paced-round-trips.sh   (carry .gpu/paced; logs in $OUT)
#
# docs/results/2026-12-01-paced-round-trips.md describes a run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
d=.gpu/paced
status=0
. scripts/machine-info.sh
machine_info "$d"/*.test >"$out/machine.txt" 2>&1
t0=$(date +%s)
gpu_tests "$d" "$out/tests.txt" || status=1
step tests
for round in 1 2; do
	for e in base-transfer.test transfer.test; do
		echo "## $e round $round" >>"$out/paced.txt"
		"$d/$e" -test.run '^$' -test.bench 'PacedFrames/(driver|copier=default)/' -test.benchtime 1x >>"$out/paced.txt" 2>&1 || status=1
	done
done
step paced
for round in 1 2; do
	for e in base-transfer.test transfer.test; do
		echo "## $e round $round" >>"$out/stream.txt"
		"$d/$e" -test.run '^$' -test.bench 'FrameStream/(driver|copier=default)/' -test.benchtime 0.4s >>"$out/stream.txt" 2>&1 || status=1
	done
done
step stream
exit $status
