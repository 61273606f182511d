#!/usr/bin/env bash
# gpu-compare.sh OLD_DIR NEW_DIR OUTDIR: runs the same benchmarks of two
# builds side by side on one machine, in alternating rounds (old then new,
# then new then old, ...), and prints every figure of both: the value of each
# round, the median of each build and the ratio new/old of the medians. Make
# the two folders with scripts/gpu-build.sh (one checkout per build: a
# worktree of the old commit, say), copy both to the GPU host, and run this
# from a checkout there (the benchmarks read their testdata). Figures of
# different machines or days do not compare; figures of one run do.
#
#   scripts/gpu-compare.sh .gpu-old .gpu /tmp/cmp
#   BENCH='^BenchmarkGetRelease$' PKGS='^pinpool$' CPUS=1,16 scripts/gpu-compare.sh .gpu-old .gpu /tmp/cmp
#
# Environment (all optional):
#   BENCH=regexp   the benchmarks (-test.bench; default '^BenchmarkTransfer$')
#   PKGS=regexp    the test binaries to run (default: every one both builds have)
#   ROUNDS=n       rounds (default 3); each round runs each build once, in a
#                  process of its own
#   BENCHTIME=, CPUS=   -test.benchtime (1s) and -test.cpu (1)
# Logs: OUTDIR/rN-old-NAME.txt, rN-new-NAME.txt; the comparison:
# OUTDIR/compare.txt, printed last. Exit status: non-zero when a run failed.
set -uo pipefail
if [ $# -ne 3 ]; then
	echo "usage: $0 OLD_DIR NEW_DIR OUTDIR" >&2
	exit 2
fi
old=$(cd "$1" && pwd) || exit 2
new=$(cd "$2" && pwd) || exit 2
mkdir -p "$3" || exit 2
out=$(cd "$3" && pwd)
cd "$(dirname "$0")/.."
root=$(pwd)
BENCH=${BENCH:-^BenchmarkTransfer$}
PKGS=${PKGS:-.}
ROUNDS=${ROUNDS:-3}
BENCHTIME=${BENCHTIME:-1s}
CPUS=${CPUS:-1}
status=0
for d in "$old" "$new"; do
	[ -f "$d/packages.txt" ] || { echo "$d/packages.txt missing: build it with scripts/gpu-build.sh DIR" >&2; exit 2; }
done
{
	echo "date:  $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "host:  $(uname -srm), $(nproc) CPUs"
	echo "gpu:   $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | paste -sd';')"
	echo "old:   $old ($(cat "$old/commit.txt" 2>/dev/null | paste -sd' '))"
	echo "new:   $new ($(cat "$new/commit.txt" 2>/dev/null | paste -sd' '))"
	echo "bench: $BENCH, $ROUNDS rounds, -test.benchtime $BENCHTIME -test.cpu $CPUS"
} | tee "$out/machine.txt"

names=() dirs=()
while read -r name dir; do
	[[ "$name" =~ $PKGS ]] || continue
	[ -x "$old/$name.test" ] && [ -x "$new/$name.test" ] || continue
	names+=("$name") dirs+=("$dir")
done <"$new/packages.txt"
[ ${#names[@]} -gt 0 ] || { echo "no test binary matches PKGS=$PKGS in both builds" >&2; exit 2; }

for r in $(seq 1 "$ROUNDS"); do
	order="old new"
	[ $((r % 2)) -eq 0 ] && order="new old"
	for i in "${!names[@]}"; do
		for b in $order; do
			[ $b = old ] && d=$old || d=$new
			log=$out/r$r-$b-${names[$i]}.txt
			(cd "$root/${dirs[$i]}" && "$d/${names[$i]}.test" -test.run '^$' -test.bench "$BENCH" -test.benchmem \
				-test.benchtime "$BENCHTIME" -test.cpu "$CPUS" -test.count 1 -test.timeout 30m) >"$log" 2>&1 ||
				{ status=1; echo "round $r, $b, ${names[$i]}: FAILED ($log)"; }
			echo "round $r $b ${names[$i]}: $(grep -c '^Benchmark.*/op' "$log") results"
		done
	done
done

# Every figure (ns/op, MB/s and the benchmarks' own metrics) of every round,
# then the medians and their ratio. Allocation counts are left out unless
# the builds differ in them.
for r in $(seq 1 "$ROUNDS"); do
	for b in old new; do
		for f in "$out"/r$r-$b-*.txt; do
			[ -f "$f" ] && awk -v b=$b '/^Benchmark/ { for (i = 3; i < NF; i += 2) print b, $1, $(i+1), $i }' "$f"
		done
	done
done | awk '
function median(s,   n, a, i, j, t) {
	n = split(s, a, " ")
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j+1] = a[j]; a[j+1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
{
	k = $2 " " $3
	if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
	v[$1, k] = v[$1, k] (v[$1, k] == "" ? "" : " ") $4
}
END {
	printf "%-64s %-14s %-30s %-30s %9s %9s %7s %6s\n", "benchmark", "unit", "old (each round)", "new (each round)", "old med", "new med", "new/old", "better"
	for (i = 1; i <= nk; i++) {
		k = keys[i]; split(k, p, " ")
		if ((p[2] == "B/op" || p[2] == "allocs/op") && v["old", k] == v["new", k]) continue
		mo = v["old", k] == "" ? "-" : sprintf("%.4g", median(v["old", k]))
		mn = v["new", k] == "" ? "-" : sprintf("%.4g", median(v["new", k]))
		ratio = (mo != "-" && mn != "-" && mo + 0 != 0) ? sprintf("%.3f", mn / mo) : "-"
		# In how many rounds the new build did better than the old one of the
		# same round (lower for ns/op, B/op and allocs/op, higher for rates).
		no = split(v["old", k], a, " "); nn = split(v["new", k], c, " "); wins = 0
		lower = p[2] ~ /^(ns|B|allocs)\/op$/
		for (j = 1; j <= no && j <= nn; j++) if (lower ? c[j] + 0 < a[j] + 0 : c[j] + 0 > a[j] + 0) wins++
		better = (no && nn) ? wins "/" (no < nn ? no : nn) : "-"
		printf "%-64s %-14s %-30s %-30s %9s %9s %7s %6s\n", p[1], p[2], v["old", k], v["new", k], mo, mn, ratio, better
	}
	print ""
	print "ns/op: lower is better; rates (MB/s, GB/s, pairs/s, ...): higher is better. better: the rounds in"
	print "which new beat old; a difference counts when it holds in every round."
}' >"$out/compare.txt"
echo "---- comparison ($([ $status -eq 0 ] && echo ok || echo "some runs FAILED")); logs in $out"
cat "$out/compare.txt"
exit $status
