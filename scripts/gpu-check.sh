#!/usr/bin/env bash
# Runs every GPU test and benchmark on the GPU host, from binaries built by
# scripts/gpu-build.sh (the GPU host has no Go toolchain), and the C
# references in scripts/ref/ compiled there with nvcc. Logs go to ./gpu-logs;
# when $OUT is set (the device tool, which returns at most 8 files) they are
# also packed into $OUT/gpu-logs.tgz with summary.txt beside it. Exit status:
# non-zero if any test failed.
#
#   scripts/gpu-check.sh            # all tests, then all benchmarks
#   BENCH=0 scripts/gpu-check.sh    # tests only
#   RUN='GPU' BENCH='CallOverhead' scripts/gpu-check.sh   # filters
#   TOOL=0 scripts/gpu-check.sh     # without the pinpool tool's runs
#   REF='seedpool' scripts/gpu-check.sh   # only these C references ('^$': none)
#   PROFILE='GetRelease/pinpool/frame' PROFILE_CPUS=32 scripts/gpu-check.sh
#                                   # also a CPU profile of that root-package
#                                   # benchmark (cpu-*.prof in the logs)
#
# The tool's runs (TOOL=1, the default) are the README's main job on the
# GPU: `pinpool bench` (full plan, JSON + PNG and SVG plots, then the table,
# CSV and Go benchmark format rendered from the JSON), `pinpool advise`
# (from that report, and from its own short measurement), `pinpool stress
# --compare-raw --compare-seed`, and `pinpool monitor --once`; their
# outputs land in the logs as tool-*.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
logs=$root/gpu-logs
rm -rf "$logs"
mkdir -p "$logs"
pack() {
	if [ -n "${OUT:-}" ]; then
		tar czf "$OUT/gpu-logs.tgz" -C "$logs" .
		cp "$summary" "$OUT/summary.txt"
	fi
}
trap pack EXIT
RUN=${RUN:-.}
TOOL=${TOOL:-1}
BENCH=${BENCH:-.}
BENCHTIME=${BENCHTIME:-1s}
COUNT=${COUNT:-1}
summary=$logs/summary.txt
: >"$summary"
status=0

{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "host: $(hostname) $(uname -srm), $(nproc) cores"
	nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,memory.total --format=csv,noheader 2>&1 || true
	command -v nvcc >/dev/null && nvcc --version | tail -2
	git -C "$root" rev-parse --short HEAD 2>/dev/null || true
} | tee "$logs/machine.txt"

# CUDA C cross-check: the .cu source of the hand-written PTX must compile.
if command -v nvcc >/dev/null; then
	if nvcc -ptx -arch=compute_75 -o "$logs/kernels-nvcc.ptx" cuda/kernels.cu >"$logs/nvcc.txt" 2>&1; then
		echo "nvcc kernels.cu: ok" | tee -a "$summary"
	else
		echo "nvcc kernels.cu: FAILED (see nvcc.txt)" | tee -a "$summary"
		status=1
	fi
	# C references (scripts/ref/*.c, *.cu): build, run, log.
	for c in scripts/ref/*.c scripts/ref/*.cu; do
		[ -f "$c" ] || continue
		ref=$(basename "${c%.*}")
		[[ "$ref" =~ ${REF-.} ]] || continue
		if nvcc -O2 -x cu -o ".gpu/$ref" "$c" -lcuda >>"$logs/nvcc.txt" 2>&1; then
			".gpu/$ref" >"$logs/ref-$ref.txt" 2>&1 && echo "ref $ref: ok" | tee -a "$summary" || { echo "ref $ref: FAILED" | tee -a "$summary"; status=1; }
		else
			echo "nvcc $c: FAILED (see nvcc.txt)" | tee -a "$summary"; status=1
		fi
	done
fi

shopt -s nullglob
tests=(.gpu/*.test)
if [ ${#tests[@]} -eq 0 ]; then
	echo "no test binaries in .gpu/: run scripts/gpu-build.sh first and carry .gpu" | tee -a "$summary"
	exit 2
fi
# run_tests NAME BIN DIR [VAR=VALUE...]: one test binary, logged and summed up.
run_tests() {
	local name=$1 bin=$2 dir=$3
	shift 3
	local log=$logs/test-$name.txt
	(cd "$dir" && env "$@" "$root/$bin" -test.v -test.count=1 -test.timeout=20m -test.run "$RUN" -test.bench '^$') >"$log" 2>&1
	local rc=$?
	local pass fail skip
	pass=$(grep -c -- '^\s*--- PASS' "$log")
	fail=$(grep -c -- '^\s*--- FAIL' "$log")
	skip=$(grep -c -- '^\s*--- SKIP' "$log")
	printf 'test %-18s rc=%d pass=%d fail=%d skip=%d\n' "$name" "$rc" "$pass" "$fail" "$skip" | tee -a "$summary"
	if [ $rc -ne 0 ]; then
		status=1
		grep -B2 -A20 -- '--- FAIL' "$log" | head -60
	fi
}
for bin in "${tests[@]}"; do
	name=$(basename "$bin" .test)
	dir=${name//-//}
	[ "$name" = pinpool ] && dir=.
	[ -d "$dir" ] || dir=.
	run_tests "$name" "$bin" "$dir"
done
# The pool's whole suite again on each CUDA method (fake_test.go reads it).
if [ -x .gpu/pinpool.test ]; then
	for m in hostalloc register; do
		run_tests "pinpool-$m" .gpu/pinpool.test . PINPOOL_TEST_BACKEND=$m
	done
fi

# tool NAME ARGS...: one run of the pinpool tool, logged and summed up.
tool() {
	local name=$1
	shift
	.gpu/pinpool "$@" >"$logs/tool-$name.out" 2>"$logs/tool-$name.err"
	local rc=$?
	printf 'tool %-16s rc=%d\n' "$name" "$rc" | tee -a "$summary"
	[ $rc -eq 0 ] || status=1
}
if [ "$TOOL" != 0 ] && [ -x .gpu/pinpool ]; then
	tool bench bench --json --plot "$logs/bench.png" --progress never
	cp "$logs/tool-bench.out" "$logs/bench.json"
	.gpu/pinpool bench --from "$logs/bench.json" --plot "$logs/bench.svg" >"$logs/bench-table.txt" 2>&1
	.gpu/pinpool bench --from "$logs/bench.json" --csv >"$logs/bench.csv" 2>&1
	.gpu/pinpool bench --from "$logs/bench.json" --gobench >"$logs/bench-gobench.txt" 2>&1
	tool advise-from advise --from "$logs/bench.json"
	tool advise advise --progress never
	tool stress stress --compare-raw --compare-seed
	tool stress-json stress --compare-raw --compare-seed --json
	tool monitor monitor --once
	[ -n "${OUT:-}" ] && cp "$logs/bench.png" "$logs/bench.svg" "$logs/bench.json" "$OUT/" 2>/dev/null
fi

if [ "$BENCH" != 0 ]; then
	for bin in "${tests[@]}"; do
		name=$(basename "$bin" .test)
		dir=${name//-//}
		[ "$name" = pinpool ] && dir=.
		[ -d "$dir" ] || dir=.
		log=$logs/bench-$name.txt
		(cd "$dir" && "$root/$bin" -test.run '^$' -test.bench "$BENCH" -test.benchmem -test.benchtime "$BENCHTIME" -test.count "$COUNT" -test.cpu "${CPUS:-1}") >"$log" 2>&1 || status=1
		grep -E '^(Benchmark|ok|FAIL|PASS)' "$log" | grep -c Benchmark | xargs printf "bench %-11s %s results\n" "$name" | tee -a "$summary"
	done
fi
if [ -n "${PROFILE:-}" ] && [ -x .gpu/pinpool.test ]; then
	for n in ${PROFILE_CPUS:-16}; do
		.gpu/pinpool.test -test.run '^$' -test.bench "$PROFILE" -test.benchtime 2s -test.cpu "$n" \
			-test.cpuprofile "$logs/cpu-$n.prof" >"$logs/profile-$n.txt" 2>&1 || status=1
		echo "profile cpu=$n: $(grep -c Benchmark "$logs/profile-$n.txt") results" | tee -a "$summary"
	done
fi
echo "---- summary ($( [ $status -eq 0 ] && echo ok || echo FAILED ))"
cat "$summary"
exit $status
