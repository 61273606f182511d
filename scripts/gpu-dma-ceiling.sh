#!/usr/bin/env bash
# The copy engine's ceiling for a chunked transfer and the batched issue
# that lifts it (issue 17), in one call of the device tool:
#   - the GPU tests of transfer and multigpu;
#   - BenchmarkChunkedDMA: 64 MiB of pinned memory as one copy and as
#     back-to-back copies of 512 KiB to 8 MiB, and the time each copy adds;
#   - BenchmarkStagedTrace and BenchmarkStagedSizes, the default copier
#     beside "batch-off" (every chunk issued on its own) in the same
#     processes, and BenchmarkTransfer from 64 MiB to 1 GiB;
#   - the CUDA C reference programs scripts/ref/batchcopy.cu (batches of
#     copies against single copies) and scripts/ref/smcopy.cu (the copy
#     engine against an SM-based copy on memory the CPU has just written).
# Binaries from this machine (no Go toolchain there):
#
#   CGO_ENABLED=0 go test -c -o .gpu/ceiling/transfer.test ./transfer
#   CGO_ENABLED=0 go test -c -o .gpu/ceiling/multigpu.test ./multigpu
#   run: bash scripts/gpu-dma-ceiling.sh   (carry .gpu/ceiling; logs in $OUT)
#
# docs/results/2026-12-01-dma-ceiling.md describes a run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
bin=.gpu/ceiling/transfer.test
status=0
. scripts/machine-info.sh
machine_info .gpu/ceiling/*.test >"$out/machine.txt" 2>&1
"$bin" -test.run GPU -test.v -test.count 1 -test.timeout 200s >"$out/tests.txt" 2>&1 || status=1
.gpu/ceiling/multigpu.test -test.run . -test.count 1 -test.timeout 120s >>"$out/tests.txt" 2>&1 || status=1
for round in 1 2; do
	"$bin" -test.run '^$' -test.bench 'ChunkedDMA' -test.benchtime 20x >>"$out/chunked-dma.txt" 2>&1 || status=1
done
for round in 1 2 3; do
	"$bin" -test.run '^$' -test.bench 'StagedTrace/copier=(default|batch-off)/size=(64|256)MiB/' -test.benchtime 20x >>"$out/trace.txt" 2>&1 || status=1
done
for round in 1 2; do
	"$bin" -test.run '^$' -test.bench 'StagedSizes/plan=(default|batch-off)/' -test.benchtime 0.3s >>"$out/sizes.txt" 2>&1 || status=1
	"$bin" -test.run '^$' -test.bench 'Transfer/(64MiB|256MiB|1GiB)/(pageable|staged|pinned)/' -test.benchtime 1s >>"$out/transfer.txt" 2>&1 || status=1
done
for ref in batchcopy smcopy; do
	if nvcc -O2 -std=c++17 -arch=native -o "/tmp/$ref" "scripts/ref/$ref.cu" >>"$out/ref-build.txt" 2>&1; then
		"/tmp/$ref" >"$out/$ref.txt" 2>&1 || status=1
	else
		status=1
	fi
done
echo "status=$status"
exit $status
