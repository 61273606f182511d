#!/usr/bin/env bash
# Call 3: BenchmarkLanesWake and BenchmarkAfterPause, two rounds.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-gpu-logs}; mkdir -p "$out"
d=.gpu/i17
for r in 1 2; do
"$d/transfer.test" -test.run '^$' -test.bench 'LanesWake' -test.benchtime 30x >>"$out/wake.txt" 2>&1
"$d/transfer.test" -test.run '^$' -test.bench 'AfterPause' -test.benchtime 15x >>"$out/pause.txt" 2>&1
done
