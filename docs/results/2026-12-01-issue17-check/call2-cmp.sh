#!/usr/bin/env bash
# Call 2: 64 MiB host to device, HEAD against the engine before the offer
# board (ba95c62) and before the handoff (e23d987), alternating, beside the
# C++ design; steal time from /proc/stat around each round.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-gpu-logs}; mkdir -p "$out"
d=.gpu/i17; status=0
. scripts/machine-info.sh
machine_info "$d"/*.test >"$out/machine.txt" 2>&1
t0=$(date +%s)
nvcc -O3 -std=c++17 -Xcompiler -O3,-mavx2,-pthread -o /tmp/staged scripts/ref/staged.cpp >"$out/ref-build.txt" 2>&1 || exit 1
for round in 1 2 3; do
  echo "## round $round $(head -1 /proc/stat) load $(cat /proc/loadavg)" | tee -a "$out/trace.txt" >>"$out/sizes.txt"
  /tmp/staged 7 focus 1 >>"$out/bound.txt" 2>&1 || status=1
  for e in base-e23d987 base-ba95c62 transfer; do
    echo "## $e" | tee -a "$out/trace.txt" >>"$out/sizes.txt"
    "$d/$e.test" -test.run '^$' -test.bench 'StagedTrace/copier=default/size=(64|256)MiB/H2D' -test.benchtime 20x >>"$out/trace.txt" 2>&1 || status=1
    "$d/$e.test" -test.run '^$' -test.bench 'StagedSizes/plan=default/size=(16|32|64)MiB/H2D' -test.benchtime 0.3s >>"$out/sizes.txt" 2>&1 || status=1
  done
  step "round $round"
done
echo "## end $(head -1 /proc/stat)" >>"$out/trace.txt"
exit $status
