#!/usr/bin/env bash
# gpu-run.sh OUTDIR: runs, on a GPU host, every GPU test and benchmark and the
# tool, from the binaries scripts/gpu-build.sh made (a GPU host needs no Go
# toolchain), with the references of scripts/ref/ beside them. Run it from a
# checkout of the same commit (the tests read their testdata). Every log goes
# to OUTDIR; the summary is printed last and kept as OUTDIR/summary.txt. Exit
# status: 0 when every test, reference and tool run passed, 1 otherwise, 2 for
# a usage error.
#
#   scripts/gpu-run.sh /tmp/out                        # everything
#   BENCH=0 scripts/gpu-run.sh /tmp/out                # tests only
#   RUN=GPU BENCH='^BenchmarkTransfer$' scripts/gpu-run.sh /tmp/out
#
# Environment (all optional):
#   BIN=DIR          the binaries (default .gpu)
#   RUN=regexp       tests to run (-test.run; default .); RUN=0: none
#   BENCH=regexp     benchmarks to run (-test.bench; default .); BENCH=0: none
#   BENCHTIME=, COUNT=, CPUS=   -test.benchtime (1s), -test.count (1),
#                    -test.cpu (1; the transfer benchmarks use every CPU
#                    whatever it says, the pool's scale with it: CPUS=1,4,16)
#   PKGS=regexp      only the test binaries whose name matches (pinpool,
#                    transfer, cuda, cmd-pinpool-internal-seedpool, ...)
#   BACKENDS=list    the pool's suite again on these CUDA methods
#                    (default "hostalloc register"; "" for none)
#   REF=regexp       the references of scripts/ref/ to build and run with
#                    nvcc, g++ and python3 (default .; REF=0: none)
#   FILES=0          skip the 4 GiB safetensors file PyTorch writes for the
#                    file tests and benchmarks (FILES_DIR, default
#                    /var/tmp/pinpool-files; removed at the end)
#   TOOL=0           skip the tool's runs
#   ARENA="32 96"    GiB sizes of the large-arena runs (`pinpool arena`: the
#                    pool's defaults as 2 MiB blocks, 1 GiB blocks and one
#                    buffer, without huge pages, the HostAlloc backend at
#                    4 GiB, one cuMemHostAlloc; PyTorch's two ways beside
#                    them), with a neighbour process copying 64 KiB every
#                    200 us and calling cuMemGetInfo, after a first round of
#                    the largest size, reported apart (default 32; 0: none)
#   ARENA_GRID=name  the grid of scripts/ref/arena.cpp that REF runs (quick,
#                    about 3 min at 32 GiB; frontier, about 25 s; full)
#   UNPRIV=0         skip the tool's run as user nobody under an 8 MiB
#                    RLIMIT_MEMLOCK (needs root, prlimit and setpriv)
set -uo pipefail
if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
root=$(pwd)
bin=$(cd "${BIN:-.gpu}" 2>/dev/null && pwd) || { echo "no binaries in ${BIN:-.gpu}: run scripts/gpu-build.sh first" >&2; exit 2; }
[ -f "$bin/packages.txt" ] || { echo "$bin/packages.txt missing: run scripts/gpu-build.sh first" >&2; exit 2; }
RUN=${RUN:-.}
BENCH=${BENCH:-.}
BENCHTIME=${BENCHTIME:-1s}
COUNT=${COUNT:-1}
CPUS=${CPUS:-1}
PKGS=${PKGS:-.}
BACKENDS=${BACKENDS-hostalloc register}
REF=${REF:-.}
summary=$out/summary.txt
: >"$summary"
status=0
note() { echo "$*" | tee -a "$summary"; }
fail() { note "$*"; status=1; }

{
	echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "host:    $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
	echo "build:   $(cat "$bin/commit.txt" 2>/dev/null)"
	echo "gpu:     $(nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>&1 | paste -sd';')"
	command -v nvcc >/dev/null && echo "nvcc:    $(nvcc --version | tail -1)"
	echo "memlock: $(ulimit -l)"
} | tee "$out/machine.txt"

# The binaries, with the folders their tests run in.
names=() dirs=()
while read -r name dir; do
	[[ "$name" =~ $PKGS ]] || continue
	[ -x "$bin/$name.test" ] || continue
	names+=("$name") dirs+=("$dir")
done <"$bin/packages.txt"

# The safetensors file that PyTorch writes and pinpool loads and writes back
# (transfer's TestGPUSafetensorsPeer, BenchmarkFileToDevice, BenchmarkFileCold).
files_env=()
fdir=${FILES_DIR:-/var/tmp/pinpool-files}
if [ "${FILES:-1}" != 0 ] && python3 -c 'import torch, safetensors' 2>/dev/null; then
	mkdir -p "$fdir"
	if python3 scripts/ref/safetensors_peer.py write "$fdir/model.safetensors" "$fdir/sums.json" >"$out/peer-write.txt" 2>&1; then
		note "peer  safetensors write: ok"
		files_env=(PINPOOL_SAFETENSORS="$fdir/model.safetensors" PINPOOL_SAFETENSORS_SUMS="$fdir/sums.json"
			PINPOOL_SAFETENSORS_OUT="$fdir/back.safetensors" PINPOOL_BENCH_FILE="$fdir/model.safetensors")
	else
		fail "peer  safetensors write: FAILED (peer-write.txt)"
	fi
else
	note "peer  safetensors: skipped (FILES=0, or no python3 with torch and safetensors)"
fi

# run_tests NAME DIR [VAR=VALUE...]: one binary's tests, logged and counted.
run_tests() {
	local name=$1 dir=$2
	shift 2
	local label="$name${1:+ $*}"
	local log=$out/test-$name${1:+-${1#*=}}.txt
	(cd "$root/$dir" && env "$@" "${files_env[@]}" "$bin/$name.test" -test.v -test.count=1 -test.timeout=20m \
		-test.run "$RUN" -test.bench '^$') >"$log" 2>&1
	local rc=$?
	printf 'test  %-40s rc=%d pass=%d fail=%d skip=%d\n' "$label" "$rc" \
		"$(grep -c -- '--- PASS' "$log")" "$(grep -c -- '--- FAIL' "$log")" "$(grep -c -- '--- SKIP' "$log")" | tee -a "$summary"
	if [ $rc -ne 0 ]; then
		status=1
		grep -A15 -- '--- FAIL' "$log" | head -40
	fi
}
if [ "$RUN" != 0 ]; then
	for i in "${!names[@]}"; do
		run_tests "${names[$i]}" "${dirs[$i]}"
	done
	# The pool's whole suite again on each CUDA method (fake_test.go reads it).
	if [ -x "$bin/pinpool.test" ] && [[ pinpool =~ $PKGS ]]; then
		for m in $BACKENDS; do
			run_tests pinpool . PINPOOL_TEST_BACKEND=$m
		done
	fi
	if [ ${#files_env[@]} -gt 0 ] && [ -f "$fdir/back.safetensors" ]; then
		if python3 scripts/ref/safetensors_peer.py verify "$fdir/back.safetensors" "$fdir/sums.json" >"$out/peer-verify.txt" 2>&1; then
			note "peer  safetensors verify (PyTorch loads pinpool's file): ok"
		else
			fail "peer  safetensors verify: FAILED (peer-verify.txt)"
		fi
	fi
fi

# The references: C and CUDA C programs built with nvcc, then the Python peers.
if [ "$REF" != 0 ]; then
	if command -v nvcc >/dev/null; then
		mkdir -p "$out/ref-bin"
		src=internal/testkernels/kernels.cu
		if [[ kernels =~ $REF ]]; then
			if nvcc -ptx -arch=compute_75 -o "$out/ref-bin/kernels.ptx" "$src" >"$out/ref-kernels.txt" 2>&1; then
				note "ref   kernels.cu (nvcc -ptx, the check of the hand-written PTX): ok"
			else
				fail "ref   kernels.cu: FAILED (ref-kernels.txt)"
			fi
		fi
		for c in scripts/ref/*.c scripts/ref/*.cu scripts/ref/*.cpp; do
			[ -f "$c" ] || continue
			ref=$(basename "${c%.*}")
			[[ "$ref" =~ $REF ]] || continue
			case $c in
			# paced.cpp loads the driver itself (no CUDA headers); its focus, 40 frames a
			# way at 30 fps and 300 at 300 fps (about 60 s).
			*/paced.cpp) build=(g++ -O2 -std=c++17 -pthread -o "$out/ref-bin/$ref" "$c" -ldl) args=(40 300) ;;
			*/arena.cpp) # plain g++: it declares the driver API itself; the first ARENA size, the quick grid
				ag=${ARENA:-32} ag=${ag%% *}
				[ "$ag" = 0 ] && ag=32
				build=(g++ -O2 -std=c++17 -pthread -o "$out/ref-bin/$ref" "$c" -ldl) args=("$ag" "${ARENA_GRID:-quick}") ;;
			*.cpp) build=(nvcc -O3 -std=c++17 -Xcompiler -O3,-mavx2,-pthread -o "$out/ref-bin/$ref" "$c") args=(7 focus 2) ;;
			*) build=(nvcc -O2 -x cu -o "$out/ref-bin/$ref" "$c" -lcuda) args=() ;;
			esac
			if ! "${build[@]}" >"$out/ref-$ref.txt" 2>&1; then
				fail "ref   $ref: build FAILED (ref-$ref.txt)"
			elif timeout 300 "$out/ref-bin/$ref" "${args[@]}" >>"$out/ref-$ref.txt" 2>&1; then
				note "ref   $ref: ok"
			else
				fail "ref   $ref: FAILED (ref-$ref.txt)"
			fi
		done
	else
		note "ref   C/CUDA references: skipped (no nvcc)"
	fi
	if python3 -c 'import torch' 2>/dev/null; then
		if [[ torch_h2d =~ $REF ]]; then
			timeout 300 python3 scripts/ref/torch_h2d.py >"$out/ref-torch_h2d.txt" 2>&1 && note "ref   torch_h2d: ok" || fail "ref   torch_h2d: FAILED (ref-torch_h2d.txt)"
		fi
		if [[ safetensors_peer =~ $REF ]] && [ ${#files_env[@]} -gt 0 ]; then
			timeout 300 python3 scripts/ref/safetensors_peer.py bench "$fdir/model.safetensors" >"$out/ref-safetensors_peer.txt" 2>&1 &&
				note "ref   safetensors_peer bench: ok" || fail "ref   safetensors_peer bench: FAILED (ref-safetensors_peer.txt)"
		fi
	else
		note "ref   Python references: skipped (no python3 with torch)"
	fi
fi

# The tool: the README's main job, its other renderings, and the other commands.
# run_cmd NAME COMMAND...: one run, logged as tool-NAME.out/.err; tool NAME
# ARGS...: one run of the pinpool tool.
run_cmd() {
	local name=$1
	shift
	"$@" >"$out/tool-$name.out" 2>"$out/tool-$name.err"
	local rc=$?
	printf 'tool  %-40s rc=%d\n' "$name" "$rc" | tee -a "$summary"
	[ $rc -eq 0 ] || status=1
}
tool() { run_cmd "$1" "$bin/pinpool" "${@:2}"; }
if [ "${TOOL:-1}" != 0 ] && [ -x "$bin/pinpool" ]; then
	tool info info
	tool bench bench --json --plot "$out/bench.png" --progress never
	cp "$out/tool-bench.out" "$out/bench.json"
	tool bench-table bench --from "$out/bench.json" --plot "$out/bench.svg"
	tool bench-csv bench --from "$out/bench.json" --csv
	tool bench-gobench bench --from "$out/bench.json" --gobench
	tool advise-from advise --from "$out/bench.json"
	tool advise advise --progress never
	tool stress stress --compare-raw --compare-seed
	tool monitor monitor --once
	if [ "${UNPRIV:-1}" != 0 ] && [ "$(id -u)" = 0 ] && command -v prlimit >/dev/null && command -v setpriv >/dev/null; then
		# A copy the user can reach: the checkout may lie under root's home.
		nb=$(mktemp -d /tmp/pinpool-nobody.XXXXXX) && cp "$bin/pinpool" "$nb/" && chmod 755 "$nb" "$nb/pinpool"
		run_cmd bench-nobody-8MiB-memlock prlimit --memlock=8388608:8388608 setpriv --reuid=65534 --regid=65534 \
			--clear-groups "$nb/pinpool" bench --sizes 4KiB,1MiB,64MiB --repeats 2 --copy-sizes 1MiB --pool-time 50ms --progress never
		rm -rf "$nb"
	fi
fi

# Large arenas, each way in a process of its own, with the neighbour process of
# scripts/ref/torch_pin.py measuring every round (each Go way also times a
# neighbour goroutine); the table is printed and kept as arena.txt.
if [ "${ARENA:-32}" != 0 ] && [ -x "$bin/pinpool" ]; then
	aj=$out/arena.jsonl nbj=$out/arena-neighbour.json
	: >"$aj"
	arena() { timeout 600 "$@" >>"$aj" 2>>"$out/arena.err" || fail "arena $*: FAILED (arena.err)"; }
	havetorch=0
	python3 -c 'import torch' 2>/dev/null && havetorch=1
	if [ $havetorch = 1 ]; then
		python3 scripts/ref/torch_pin.py neighbour "$nbj" >"$out/arena-neighbour.out" 2>>"$out/arena.err" &
		nbpid=$!
		for _ in $(seq 1 60); do grep -q ready "$out/arena-neighbour.out" 2>/dev/null && break; sleep 0.5; done
	fi
	# The first pin of memory no process has touched yet on a fresh machine
	# runs at a fraction of the rate (arena.cpp's first round too): one
	# round of the largest size first, kept apart as the first-round figure.
	wg=0
	for g in ${ARENA:-32}; do [ "$g" -gt "$wg" ] && wg=$g; done
	timeout 300 "$bin/pinpool" arena --json --progress never --sizes "${wg}GiB" --ways pool >"$out/arena-warm.jsonl" 2>>"$out/arena.err"
	note "arena first round (${wg} GiB, one buffer, before the rest): $(python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); print("%.1f GB/s" % r.get("gb_per_s", 0), r.get("error") or "")' "$out/arena-warm.jsonl" 2>/dev/null || echo failed)"
	first=1
	for g in ${ARENA:-32}; do
		arena "$bin/pinpool" arena --json --progress never --sizes "${g}GiB" \
			--ways pool:blocks=2MiB,pool:blocks=1GiB,pool,pool+register+small:blocks=2MiB,pool+register+small
		[ $havetorch = 1 ] && arena python3 scripts/ref/torch_pin.py pin "$g" register
		if [ $first = 1 ]; then
			arena "$bin/pinpool" arena --json --progress never --sizes 4GiB --ways pool+hostalloc:blocks=2MiB
			[ $havetorch = 1 ] && arena python3 scripts/ref/torch_pin.py pin "$g"
			arena "$bin/pinpool" arena --json --progress never --sizes "${g}GiB" --ways hostalloc-raw
		fi
		first=0
	done
	if [ $havetorch = 1 ]; then
		kill -TERM $nbpid 2>/dev/null
		wait $nbpid 2>/dev/null
		python3 scripts/ref/torch_pin.py split "$nbj" "$aj" >"$out/arena-nb.jsonl" 2>>"$out/arena.err"
	fi
	python3 - "$aj" "$out/arena-nb.jsonl" <<'PY' | tee "$out/arena.txt"
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ext = {}
if os.path.exists(sys.argv[2]):
    for l in open(sys.argv[2]):
        if l.startswith("{"):
            r = json.loads(l); ext[(r["way"], r["bytes"])] = r
def ms(ns): return "-" if ns is None else "%.2f" % (ns / 1e6)
def lat(l): return "-" if not l else "%s/%s/%s" % (ms(l.get("p50_ns")), ms(l.get("p99_ns")), ms(l.get("max_ns")))
print("%-36s %4s %6s %6s %-22s %-22s %-9s %s" % ("way", "GiB", "GB/s", "close", "goroutine nb, grow", "goroutine nb, close", "process", "error"))
print("%-36s %4s %6s %6s %-22s %-22s %-9s" % ("", "", "", "s", "p50/p99/max ms", "p50/p99/max ms", "meminfo ms"))
for r in rows:
    e = ext.get((r["way"], r["bytes"]), {})
    mi = e.get("grow_meminfo") or {}
    print("%-36s %4.0f %6.1f %6.2f %-22s %-22s %-9s %s" % (r["way"][:36], r["bytes"] / 2**30, r.get("gb_per_s", 0), r.get("close_ns", 0) / 1e9,
          lat(r.get("neighbour")), lat(r.get("neighbour_close")), ms(mi.get("max_ns")), (r.get("error") or "")[:50]))
PY
	note "arena $(grep -c . "$aj") ways measured (arena.txt)"
fi

if [ "$BENCH" != 0 ]; then
	for i in "${!names[@]}"; do
		name=${names[$i]}
		log=$out/bench-$name.txt
		(cd "$root/${dirs[$i]}" && env "${files_env[@]}" "$bin/$name.test" -test.run '^$' -test.bench "$BENCH" -test.benchmem \
			-test.benchtime "$BENCHTIME" -test.count "$COUNT" -test.cpu "$CPUS" -test.timeout 60m) >"$log" 2>&1
		rc=$?
		printf 'bench %-40s rc=%d results=%d\n' "$name" "$rc" "$(grep -c '^Benchmark.*/op' "$log")" | tee -a "$summary"
		[ $rc -eq 0 ] || { status=1; grep -B2 -A10 -E -- '--- FAIL|^panic' "$log" | head -30; }
	done
fi
rm -f "$fdir/model.safetensors" "$fdir/sums.json" "$fdir/back.safetensors" 2>/dev/null

echo "---- summary: $([ $status -eq 0 ] && echo ok || echo FAILED); logs in $out"
cat "$summary"
exit $status
