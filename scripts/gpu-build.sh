#!/usr/bin/env bash
# gpu-build.sh [DIR]: builds, on a machine with Go, everything a GPU host runs
# (a GPU host needs no Go toolchain): one stripped, pure-Go test binary per
# package whose tests can use a GPU, and the pinpool tool, into DIR (default
# .gpu, which git ignores). Copy DIR and the checkout to the GPU host, then
# run scripts/gpu-run.sh or scripts/gpu-compare.sh there (docs/gpu-testing.md).
#
# DIR/packages.txt lists "NAME DIR" for every test binary NAME.test, DIR
# being the package's folder (tests run there, to find their testdata).
#
#   scripts/gpu-build.sh                 # into .gpu
#   scripts/gpu-build.sh /tmp/new        # into /tmp/new (e.g. one build of two to compare)
#   GOARCH=arm64 scripts/gpu-build.sh    # for an arm64 GPU host (Jetson, Grace)
#   PKGS='^(pinpool|transfer)$' scripts/gpu-build.sh   # only these test binaries
#
# PKGS matches the names in packages.txt. All binaries and the tool take about
# 75 MiB; without the tool's own tests (cmd-pinpool, cmd-pinpool-internal-measure,
# which mostly need no GPU) about 48 MiB:
#   PKGS='^(pinpool|cuda|cudahost|transfer|multigpu|internal-testkernels|cmd-pinpool-internal-seedpool)$'
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu}
mkdir -p "$out"
export CGO_ENABLED=0
rm -f "$out"/*.test "$out/packages.txt"
# A package gets a binary when its tests can use a GPU: they import the cuda
# or cudahost package, or check for a driver. Stripped (-s -w) to keep the
# folder small enough to carry.
for pkg in $(go list ./...); do
	rel=${pkg#github.com/pinpool/pinpool}
	rel=${rel#/}
	dir=${rel:-.}
	name=${rel:-pinpool}
	name=${name//\//-}
	[[ "$name" =~ ${PKGS:-.} ]] || continue
	if grep -qlE 'pinpool/cuda"|pinpool/cudahost"|pinpool/internal/testkernels"|IsNoDriver|hasGPU' "$dir"/*_test.go 2>/dev/null; then
		go test -c -ldflags='-s -w' -o "$out/$name.test" "$pkg"
		echo "$name $dir" >>"$out/packages.txt"
	fi
done
go build -ldflags='-s -w' -o "$out/pinpool" ./cmd/pinpool
git rev-parse --short HEAD >"$out/commit.txt" 2>/dev/null || echo unknown >"$out/commit.txt"
git diff --quiet 2>/dev/null || echo "(with uncommitted changes)" >>"$out/commit.txt"
du -sh "$out"
cat "$out/packages.txt"
