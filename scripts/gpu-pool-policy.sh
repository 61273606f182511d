#!/usr/bin/env bash
# The pool's memory policy on the GPU host (issue 16), in one call of the
# device tool: the policy, guard and adversarial tests of the root package
# on both CUDA backends, BenchmarkBurst (default options beside MaxIdle=-1
# and the seed's cliff, with a neighbour's 64 KiB copy timed), and the
# tool's info and monitor lines (cgroup limit and headroom). Binaries come
# from this machine (no Go toolchain there):
#
#   CGO_ENABLED=0 go test -c -o .gpu/pool/pinpool.test .
#   CGO_ENABLED=0 go build -o .gpu/pool/pinpool ./cmd/pinpool
#   run: bash scripts/gpu-pool-policy.sh   (carry .gpu/pool; logs in $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
bin=.gpu/pool
{
	date -u +%Y-%m-%dT%H:%M:%SZ
	hostname; uname -srm; nproc
	nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
	git rev-parse --short HEAD 2>/dev/null
} >"$out/machine.txt" 2>&1
status=0
for m in hostalloc register; do
	PINPOOL_TEST_BACKEND=$m "$bin/pinpool.test" -test.v -test.count=1 -test.timeout=5m \
		-test.run "${RUN:-GPU|Burst|Decay|Pressure|Cgroup|Budget|Reserve|Trim|MaxIdle|IdleTimeout|Adv}" >"$out/test-$m.txt" 2>&1 || status=1
	printf "test %s: %s passed, %s failed\n" $m "$(grep -c -- "--- PASS" "$out/test-$m.txt")" "$(grep -c -- "--- FAIL" "$out/test-$m.txt")"
done
"$bin/pinpool.test" -test.run '^$' -test.bench "${BENCH:-Burst}" -test.benchtime "${BENCHTIME:-2s}" -test.count "${COUNT:-1}" >"$out/bench-burst.txt" 2>&1 || status=1
grep -c '^Benchmark' "$out/bench-burst.txt" | sed 's/^/benchmarks: /'
"$bin/pinpool" info >"$out/tool-info.txt" 2>&1 || status=1
"$bin/pinpool" monitor --once >"$out/tool-monitor.txt" 2>&1 || status=1
exit $status
