#!/usr/bin/env bash
# Every figure of issue 17 measured on the engine as it stands, each beside
# its baseline in the same call of the device tool:
#   - tests: the GPU tests of transfer, multigpu and cuda;
#   - bound: 64 and 256 MiB host to device, the Go engine
#     (BenchmarkStagedTrace) alternating with the same design and the best
#     others in C++ (scripts/ref/staged.cpp, compiled there), two rounds;
#   - sizes: BenchmarkStagedSizes, 1 MiB to 1 GiB both ways, beside the
#     driver's pageable copy (no dip);
#   - frames: BenchmarkFrameStream, 1 and 10 goroutines both ways, beside
#     the driver's copy, two rounds;
#   - paced: BenchmarkPacedFrames, one 1080p stream uploaded at 30 and 300
#     fps, the driver's copy and the default copier in processes of their
#     own, alternating, three rounds (CPU time and wall time per frame);
#   - pause: what an upload pays when it comes after a pause or reads
#     memory that is not in the CPU caches (BenchmarkAfterPause,
#     BenchmarkColdSource, BenchmarkColdCopy), two rounds;
#   - lanes: BenchmarkLanesOffer, an offer to 1, 3 and 7 spinning lanes,
#     and BenchmarkLanesWake, to 7 lanes asleep;
#   - nobody: pinpool bench as user nobody with an 8 MiB memlock limit.
# Binaries from this machine (no Go toolchain there):
#
#   d=.gpu/i17; flags='-ldflags=-s -w'
#   CGO_ENABLED=0 go test -c "$flags" -o $d/transfer.test ./transfer
#   CGO_ENABLED=0 go test -c "$flags" -o $d/multigpu.test ./multigpu
#   CGO_ENABLED=0 go test -c "$flags" -o $d/cuda.test ./cuda
#   CGO_ENABLED=0 go build "$flags" -o $d/pinpool ./cmd/pinpool
#   run: bash scripts/gpu-issue17.sh   (carry .gpu/i17)
#
# Logs: $OUT/machine.txt (machine, binaries, progress) and $OUT/logs.tgz
# (one file per part above).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
logs=$(mktemp -d)
trap 'tar czf "$out/logs.tgz" -C "$logs" .' EXIT
d=.gpu/i17
status=0
. scripts/machine-info.sh
machine_info "$d"/*.test "$d/pinpool" >"$out/machine.txt" 2>&1
t0=$(date +%s)
bench() { # file binary args...: a benchmark run appended to $logs/file
	local f=$1 bin=$2
	shift 2
	echo "## $(basename "$bin") $*" >>"$logs/$f"
	"$bin" -test.run '^$' "$@" >>"$logs/$f" 2>&1 || status=1
}

gpu_tests "$d" "$logs/tests.txt" || status=1
step tests

if nvcc -O3 -std=c++17 -Xcompiler -O3,-mavx2,-pthread -o /tmp/staged scripts/ref/staged.cpp >"$logs/ref-build.txt" 2>&1; then
	for round in 1 2; do
		echo "## round $round" >>"$logs/bound.txt"
		/tmp/staged 7 focus 1 >>"$logs/bound.txt" 2>&1 || status=1
		bench bound.txt "$d/transfer.test" -test.bench 'StagedTrace/copier=default/size=(64|256)MiB/H2D' -test.benchtime 20x
	done
else
	status=1
fi
step bound

bench sizes.txt "$d/transfer.test" -test.bench 'StagedSizes/plan=default/' -test.benchtime 0.3s
step sizes

for round in 1 2; do
	bench frames.txt "$d/transfer.test" -test.bench 'FrameStream/(driver|copier=default)/' -test.benchtime 0.4s
done
step frames

for round in 1 2 3; do
	for way in driver copier=default; do
		bench paced.txt "$d/transfer.test" -test.bench "PacedFrames/$way/fps=(30|300)/H2D" -test.benchtime 1x
	done
done
step paced

for round in 1 2; do
	bench pause.txt "$d/transfer.test" -test.bench 'AfterPause' -test.benchtime 15x
	bench pause.txt "$d/transfer.test" -test.bench 'ColdSource' -test.benchtime 30x
	bench pause.txt "$d/transfer.test" -test.bench 'ColdCopy' -test.benchtime 20x
done
step pause

bench lanes.txt "$d/transfer.test" -test.bench LanesOffer -test.benchtime 0.5s -test.count 3
bench lanes.txt "$d/transfer.test" -test.bench LanesWake -test.benchtime 30x -test.count 3
step lanes

bench_as_nobody "$d/pinpool" "$logs/nobody.txt" || status=1
step nobody
exit $status
