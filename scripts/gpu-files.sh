#!/usr/bin/env bash
# Files to the GPU (issue 18), in one call of the device tool: PyTorch writes
# a 4 GiB safetensors file (8 tensors of 512 MiB) and checksums its own load;
# pinpool loads it, checks every tensor against those checksums and writes
# the device memory back as a file, which PyTorch loads and checks; then
# PyTorch's loaders and pinpool's are timed on the same file, warm and cold,
# beside the disk's own direct read rate (dd iflag=direct). Binaries from
# this machine (no Go toolchain there):
#
#   CGO_ENABLED=0 go test -c -o .gpu/files/transfer.test ./transfer
#   run: bash scripts/gpu-files.sh   (carry .gpu/files; logs in $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
dir=${FILES_DIR:-/var/tmp/pinpool-files}
mkdir -p "$dir"
bin=.gpu/files/transfer.test
status=0
{
	date -u +%Y-%m-%dT%H:%M:%SZ; hostname; uname -srm; nproc
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	df -hT "$dir" | tail -1
	python3 -c 'import torch, safetensors; print("torch", torch.__version__, "safetensors", safetensors.__version__)'
} >"$out/machine.txt" 2>&1
python3 scripts/ref/safetensors_peer.py write "$dir/model.safetensors" "$dir/sums.json" >"$out/peer-write.txt" 2>&1 || status=1
PINPOOL_SAFETENSORS=$dir/model.safetensors PINPOOL_SAFETENSORS_SUMS=$dir/sums.json PINPOOL_SAFETENSORS_OUT=$dir/back.safetensors \
	"$bin" -test.v -test.count=1 -test.timeout=8m -test.run "${RUN:-GPU(File|Safetensors)|Stream|SplitPieces|ToDeviceFromFile|FileDirect}" >"$out/test-files.txt" 2>&1 || status=1
python3 scripts/ref/safetensors_peer.py verify "$dir/back.safetensors" "$dir/sums.json" >"$out/peer-verify.txt" 2>&1 || status=1
rm -f "$dir/back.safetensors"
if [ "${BENCH:-1}" != 0 ]; then
	PINPOOL_BENCH_FILE=$dir/model.safetensors "$bin" -test.run '^$' -test.bench 'FileToDevice|FileCold' -test.benchtime "${BENCHTIME:-2x}" >"$out/bench-files.txt" 2>&1 || status=1
	# The disk's own rates, cold, in the same run: direct (no page cache) and buffered.
	drop() { python3 -c 'import os,sys; fd=os.open(sys.argv[1],os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)' "$1"; }
	for i in 1 2; do
		drop "$dir/model.safetensors"; echo "dd bs=16M iflag=direct, cold: $(dd if="$dir/model.safetensors" of=/dev/null bs=16M iflag=direct 2>&1 | tail -1)"
		drop "$dir/model.safetensors"; echo "dd bs=16M buffered, cold: $(dd if="$dir/model.safetensors" of=/dev/null bs=16M 2>&1 | tail -1)"
	done >"$out/disk.txt"
	python3 scripts/ref/safetensors_peer.py bench "$dir/model.safetensors" >"$out/peer-bench.txt" 2>&1 || status=1
fi
grep -E -- '^(--- FAIL|--- PASS|ok|FAIL)' "$out/test-files.txt" | sort | uniq -c | sort -rn | head
cat "$out/peer-verify.txt"; grep -E '^Benchmark' "$out/bench-files.txt"; cat "$out/disk.txt" "$out/peer-bench.txt"
exit $status
