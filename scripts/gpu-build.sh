#!/usr/bin/env bash
# Builds, on a development machine, everything the GPU host runs: one test
# binary per package that has GPU tests, and the pinpool tool, into .gpu/
# (ignored by git; carried to the GPU host). Pure Go (CGO_ENABLED=0), so the
# binaries run on the GPU host, which has no Go toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu
export CGO_ENABLED=0
for pkg in $(go list ./...); do
	rel=${pkg#github.com/pinpool/pinpool}
	rel=${rel#/}
	name=${rel:-pinpool}
	name=${name//\//-}
	# Only packages with test files get a binary.
	if [ -n "$(go list -f '{{len .TestGoFiles}}{{len .XTestGoFiles}}' "$pkg" | grep -v '^00$')" ]; then
		go test -c -o ".gpu/$name.test" "$pkg"
	fi
done
go build -o .gpu/pinpool ./cmd/pinpool
ls -la .gpu
