#!/usr/bin/env bash
# Builds, on a development machine, everything the GPU host runs: one test
# binary per package that has GPU tests, and the pinpool tool, into .gpu/
# (ignored by git; carried to the GPU host). Pure Go (CGO_ENABLED=0), so the
# binaries run on the GPU host, which has no Go toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu
export CGO_ENABLED=0
# Only packages whose tests can use a GPU get a binary (their test files
# mention the cuda or cudahost package, IsNoDriver or hasGPU); binaries are
# stripped (-s -w) so that .gpu stays within the device tool's 64 MiB carry.
rm -f .gpu/*.test
for pkg in $(go list ./...); do
	rel=${pkg#github.com/pinpool/pinpool}
	rel=${rel#/}
	name=${rel:-pinpool}
	name=${name//\//-}
	dir=${rel:-.}
	if grep -qlE 'pinpool/cuda"|pinpool/cudahost"|IsNoDriver|hasGPU' "$dir"/*_test.go 2>/dev/null; then
		go test -c -ldflags='-s -w' -o ".gpu/$name.test" "$pkg"
	fi
done
go build -ldflags='-s -w' -o .gpu/pinpool ./cmd/pinpool
ls -la .gpu
