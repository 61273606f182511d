#!/usr/bin/env bash
# Call 4: BenchmarkColdCopy with prefetching off, 512 and 2048 bytes ahead;
# BenchmarkColdSource (then with 12 and 15 lanes too) with prefetching off,
# 1024 and 4096 bytes ahead, two rounds (variants.diff: -transfer.prefetch).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-gpu-logs}; mkdir -p "$out"
d=.gpu/i17
for p in 0 512 2048; do
  echo "## prefetch $p" >>"$out/coldcopy.txt"
  "$d/transfer.test" -test.run '^$' -test.bench 'ColdCopy' -test.benchtime 20x -transfer.prefetch $p >>"$out/coldcopy.txt" 2>&1
done
for r in 1 2; do for p in 0 1024 4096; do
  echo "## round $r prefetch $p" >>"$out/coldsource.txt"
  "$d/transfer.test" -test.run '^$' -test.bench 'ColdSource' -test.benchtime 30x -transfer.prefetch $p >>"$out/coldsource.txt" 2>&1
done; done
