#!/usr/bin/env bash
# The transfer engine's GPU check (issue 17): its GPU tests and multigpu's,
# then the shape benchmarks of transfer (BenchmarkStagedSizes,
# BenchmarkFrameStream, BenchmarkPacedFrames), each beside the driver's own
# copy in the same run; with a second engine's test binary, the two engines
# alternate. The GPU host has no Go toolchain, so the binaries are built
# here first:
#
#   scripts/gpu-transfer.sh build DIR        # here: DIR/{transfer,multigpu,cuda,pinpool}.test
#   scripts/gpu-transfer.sh run DIR [BASE]   # on the GPU host; BASE: another transfer.test
#
# Logs go to $OUT (the device tool) or ./gpu-logs: machine.txt, tests.txt,
# sizes.txt, frames.txt, paced.txt, paced-alone.txt (each engine's default
# copier and the driver in processes of their own, alternating), trace.txt
# (where a staged transfer's time goes: before the first DMA, between the
# copies, after the last), spin.txt (the frame stream with the busy wait's
# constants changed by test flags, in processes of their own), costs.txt (a
# memory-guard look, cuda.IsPinned). docs/results/2026-12-01-transfer-shape.md,
# docs/results/2026-12-01-paced-frames.md and docs/results/2026-12-01-spin.md
# describe runs and how their base binaries were built.
set -uo pipefail
mode=${1:-}
dir=${2:-}
[ -n "$mode" ] && [ -n "$dir" ] || { sed -n '2,20p' "$0"; exit 2; }
case $mode in
build)
	mkdir -p "$dir"
	CGO_ENABLED=0 go test -c -o "$dir/transfer.test" ./transfer &&
		CGO_ENABLED=0 go test -c -o "$dir/multigpu.test" ./multigpu &&
		CGO_ENABLED=0 go test -c -o "$dir/cuda.test" ./cuda &&
		CGO_ENABLED=0 go test -c -o "$dir/pinpool.test" .
	exit
	;;
run) ;;
*)
	echo "unknown mode $mode" >&2
	exit 2
	;;
esac
base=${3:-}
O=${OUT:-$(pwd)/gpu-logs}
mkdir -p "$O"
cd "$dir" || exit 1
{
	date -u +%Y-%m-%dT%H:%M:%SZ
	hostname
	uname -srm
	nproc
	nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,memory.total --format=csv,noheader
	lscpu | grep -E 'Model name|^CPU\(s\)|NUMA node\(s\)'
	sha1sum ./*.test $base
} >"$O/machine.txt" 2>&1
cat "$O/machine.txt"
t0=$(date +%s)
status=0
./transfer.test -test.run 'GPU' -test.v -test.count 1 -test.timeout 200s >"$O/tests.txt" 2>&1 || status=1
echo "transfer GPU tests rc=$status" | tee -a "$O/tests.txt"
./multigpu.test -test.run . -test.v -test.count 1 -test.timeout 120s >>"$O/tests.txt" 2>&1 || status=1
echo "multigpu tests rc=$status" | tee -a "$O/tests.txt"
grep -E '^(--- FAIL|FAIL)' "$O/tests.txt"
echo "tests done after $(($(date +%s) - t0))s"
bench() { # file, binary, args...
	local f=$1 bin=$2
	shift 2
	echo "## $bin $*" >>"$O/$f"
	"$bin" -test.run '^$' "$@" >>"$O/$f" 2>&1 || status=1
	echo "## rc=$?" >>"$O/$f"
}
engines=(./transfer.test)
[ -n "$base" ] && engines=("$base" ./transfer.test)
for round in 1 2; do
	for e in "${engines[@]}"; do
		bench sizes.txt "$e" -test.bench 'StagedSizes' -test.benchtime 0.3s
	done
	echo "sizes round $round done after $(($(date +%s) - t0))s"
done
for e in "${engines[@]}"; do
	bench frames.txt "$e" -test.bench 'FrameStream' -test.benchtime 0.4s
done
echo "frames done after $(($(date +%s) - t0))s"
for e in "${engines[@]}"; do
	bench paced.txt "$e" -test.bench 'PacedFrames' -test.benchtime 1x
done
echo "paced done after $(($(date +%s) - t0))s"
for round in 1 2; do
	bench paced-alone.txt ./transfer.test -test.bench 'PacedFrames/driver/' -test.benchtime 1x
	for e in "${engines[@]}"; do
		bench paced-alone.txt "$e" -test.bench 'PacedFrames/copier=default/' -test.benchtime 1x
	done
done
echo "paced alone done after $(($(date +%s) - t0))s"
bench trace.txt ./transfer.test -test.bench 'StagedTrace' -test.benchtime 20x -test.v
echo "trace done after $(($(date +%s) - t0))s"
for round in 1 2; do
	for flags in "" -transfer.endspin=0 -transfer.spinyield=2us; do
		bench spin.txt ./transfer.test -test.bench 'FrameStream/copier=default/goroutines=1/' -test.benchtime 0.4s $flags
	done
done
echo "spin done after $(($(date +%s) - t0))s"
[ -x ./pinpool.test ] && bench costs.txt ./pinpool.test -test.bench 'GuardLook' -test.benchtime 200x
[ -x ./cuda.test ] && bench costs.txt ./cuda.test -test.bench 'IsPinned' -test.benchtime 100x
echo "costs done after $(($(date +%s) - t0))s"
exit $status
