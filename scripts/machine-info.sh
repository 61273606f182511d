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
