#!/usr/bin/env bash
# The handoff of a back-to-back download's staging (issue 17), in one call
# of the device tool, the engine before it ("base") beside the new one in
# alternating processes:
#   - the GPU tests of transfer and multigpu (new engine);
#   - BenchmarkFrameStream, 1080p frames back to back both ways, 1 and 10
#     goroutines, the driver's copy and the default copier, three rounds;
#   - BenchmarkStagedSizes device to host, 1 to 16 MiB, three rounds;
#   - BenchmarkPacedFrames downloads and round trips, one round.
# Binaries from this machine (no Go toolchain there):
#
#   d=.gpu/handoff; flags='-ldflags=-s -w'
#   CGO_ENABLED=0 go test -c "$flags" -o $d/transfer.test ./transfer
#   CGO_ENABLED=0 go test -c "$flags" -o $d/multigpu.test ./multigpu
#   and base-transfer.test the same way from a worktree of the base commit.
#   run: bash scripts/gpu-handoff.sh   (carry .gpu/handoff; logs in $OUT)
#
# docs/results/2026-12-01-staged-bound.md, section 5, describes a run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
d=.gpu/handoff
status=0
. scripts/machine-info.sh
machine_info "$d"/*.test >"$out/machine.txt" 2>&1
t0=$(date +%s)
gpu_tests "$d" "$out/tests.txt" || status=1
step tests
for round in 1 2 3; do
	for e in base-transfer.test transfer.test; do
		echo "## $e round $round" | tee -a "$out/stream.txt" >>"$out/sizes.txt"
		"$d/$e" -test.run '^$' -test.bench 'FrameStream/(driver|copier=default)/' -test.benchtime 0.4s >>"$out/stream.txt" 2>&1 || status=1
		"$d/$e" -test.run '^$' -test.bench 'StagedSizes/plan=default/size=(1|2|4|8|16)MiB/D2H' -test.benchtime 0.3s >>"$out/sizes.txt" 2>&1 || status=1
	done
done
step stream
for e in base-transfer.test transfer.test; do
	echo "## $e" >>"$out/paced.txt"
	"$d/$e" -test.run '^$' -test.bench 'PacedFrames/(driver|copier=default)/fps=(30|300)/(D2H|round-trip)' -test.benchtime 1x >>"$out/paced.txt" 2>&1 || status=1
done
step paced
exit $status
