#!/usr/bin/env bash
# Call 5: a chunked upload that finds its lanes asleep writes staging with
# streaming stores, every chunk (1) or the first window's (2), against
# cached stores (0) (variants.diff: -transfer.coldstream), two rounds.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-gpu-logs}; mkdir -p "$out"
d=.gpu/i17
for r in 1 2; do for m in 0 1 2; do
  echo "## round $r coldstream $m" | tee -a "$out/sizes.txt" >>"$out/pause.txt"
  "$d/transfer.test" -test.run '^$' -test.bench 'AfterPause/H2D/(none|sleep-2ms|sleep-35ms|driver-other)' -test.benchtime 15x -transfer.coldstream $m >>"$out/pause.txt" 2>&1
  "$d/transfer.test" -test.run '^$' -test.bench 'StagedSizes/plan=default/size=(64MiB|256MiB|1GiB)/H2D' -test.benchtime 0.3s -transfer.coldstream $m >>"$out/sizes.txt" 2>&1
done; done
