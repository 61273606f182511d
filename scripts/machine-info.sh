# The GPU measurement scripts' shared helpers.
#
# machine_info FILE... prints what a GPU run's logs need to name its
# machine: the date, host, kernel, CPUs, GPU and link, the CPU's caches,
# and the checksums of FILE... (the binaries that ran). Sourced by the
# scripts/gpu-*.sh measurement scripts; its output goes to machine.txt.
machine_info() {
	date -u +%Y-%m-%dT%H:%M:%SZ; hostname; uname -srm; nproc
	nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
	lscpu | grep -E 'Model name|L2 cache|L3 cache'
	sha1sum "$@"
}

# step NAME appends to $out/machine.txt how long the run has taken since
# $t0 and its $status once step NAME is done: the measurement scripts'
# progress line.
step() { echo "$1 after $(($(date +%s) - t0))s, status $status" >>"$out/machine.txt"; }

# bench_as_nobody PINPOOL FILE runs the README's main job, pinpool bench
# (a short plan), as user nobody with an 8 MiB memlock limit, from a copy
# of the binary PINPOOL that nobody may run, into FILE; its status is
# bench's.
bench_as_nobody() {
	cp "$1" /tmp/pinpool && chmod 755 /tmp/pinpool &&
		prlimit --memlock=8388608:8388608 setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all \
			/tmp/pinpool bench --sizes 4KiB,1MiB,64MiB --repeats 2 --copy-sizes 1MiB --pool-time 50ms >"$2" 2>&1
}

# gpu_tests DIR FILE runs, into FILE, the GPU tests of transfer and
# multigpu from the test binaries in DIR, and cuda's when DIR holds
# cuda.test; its status is non-zero when one of them failed.
gpu_tests() {
	local rc=0
	"$1/transfer.test" -test.run GPU -test.count 1 -test.timeout 200s >"$2" 2>&1 || rc=1
	"$1/multigpu.test" -test.run . -test.count 1 -test.timeout 120s >>"$2" 2>&1 || rc=1
	if [ -e "$1/cuda.test" ]; then
		"$1/cuda.test" -test.run GPU -test.count 1 -test.timeout 120s >>"$2" 2>&1 || rc=1
	fi
	return $rc
}
