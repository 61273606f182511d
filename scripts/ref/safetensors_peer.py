#!/usr/bin/env python3
"""The PyTorch peer of pinpool's file loading (issue 18), run on the GPU host
by scripts/gpu-run.sh:

  safetensors_peer.py write PATH SUMS   8 tensors of 512 MiB (F32 and BF16, random, made on the GPU),
                                         saved with safetensors.torch.save_file; SUMS gets the checksum
                                         of every tensor as PyTorch loads the file back to cuda:0
  safetensors_peer.py verify PATH SUMS  load PATH (written by pinpool) with PyTorch; every checksum
                                         must equal SUMS
  safetensors_peer.py bench PATH        time PyTorch's ways of getting the file to cuda:0, warm (best of 2)
                                         and cold (dropped from the page cache first), one JSON line each

The checksum is pinpool's checksum kernel (internal/testkernels/reference.go): the sum over the tensor's bytes b[j] of
(b[j]+1) * ((j*0x9E3779B97F4A7C15) | 1), mod 2^64, computed here on the GPU with int64 arithmetic that
wraps like uint64.
"""
import json, os, subprocess, sys, time

import numpy as np
import torch
from safetensors.torch import load_file, save_file

K = 0x9E3779B97F4A7C15 - (1 << 64)  # as int64


def checksum(t):
    b = t.contiguous().view(torch.uint8).flatten()
    n, total, step = b.numel(), 0, 64 << 20
    for s in range(0, n, step):
        e = min(n, s + step)
        j = torch.arange(s, e, device=b.device, dtype=torch.int64)
        v = (b[s:e].to(torch.int64) + 1) * ((j * K) | 1)
        total = (total + int(v.sum().item())) % (1 << 64)
    return total


def drop(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def write(path, sums_path):
    g = torch.Generator(device="cuda:0").manual_seed(18)
    tensors = {}
    for i in range(8):
        if i % 2 == 0:
            tensors[f"layer{i}.weight"] = torch.randn(128 << 20, device="cuda:0", generator=g)  # F32, 512 MiB
        else:
            tensors[f"layer{i}.weight"] = torch.randn(256 << 20, device="cuda:0", generator=g).to(torch.bfloat16)
    save_file({k: v.cpu() for k, v in tensors.items()}, path, metadata={"writer": "pytorch", "issue": "18"})
    loaded = load_file(path, device="cuda:0")
    sums = {k: str(checksum(v)) for k, v in loaded.items()}
    with open(sums_path, "w") as f:
        json.dump(sums, f)
    print(json.dumps({"wrote": path, "bytes": os.path.getsize(path), "tensors": len(sums)}))


def verify(path, sums_path):
    sums = json.load(open(sums_path))
    loaded = load_file(path, device="cuda:0")
    bad = [k for k, v in loaded.items() if str(checksum(v)) != sums.get(k)]
    print(json.dumps({"verified": path, "tensors": len(loaded), "mismatches": bad}))
    return 1 if bad or len(loaded) != len(sums) else 0


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def bench(path):
    size = os.path.getsize(path)

    def st_load():
        load_file(path, device="cuda:0")

    def np_cuda():
        torch.from_numpy(np.fromfile(path, dtype=np.uint8)).cuda()

    dev = torch.empty(size, dtype=torch.uint8, device="cuda:0")
    ring = [torch.empty(64 << 20, dtype=torch.uint8).pin_memory() for _ in range(2)]
    events = [torch.cuda.Event(), torch.cuda.Event()]
    stream = torch.cuda.Stream()

    def pinned_ring():
        with open(path, "rb", buffering=0) as f:
            off, i = 0, 0
            while off < size:
                buf = ring[i % 2]
                events[i % 2].synchronize()
                n = f.readinto(memoryview(buf.numpy()))
                if n == 0:
                    break
                with torch.cuda.stream(stream):
                    dev[off:off + n].copy_(buf[:n], non_blocking=True)
                    events[i % 2].record(stream)
                off += n
                i += 1
            stream.synchronize()

    def dd(direct):
        flag = ["iflag=direct"] if direct else []
        subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=16M"] + flag, check=True, capture_output=True)

    ways = [("safetensors.load_file", st_load), ("np.fromfile+.cuda()", np_cuda), ("pinned ring 2x64MiB", pinned_ring),
            ("dd buffered", lambda: dd(False)), ("dd iflag=direct", lambda: dd(True))]
    for name, fn in ways:
        drop(path)
        cold = timed(fn)
        fn()  # warm the page cache (dd direct does not: read it buffered)
        if "direct" in name:
            dd(False)
        warm = min(timed(fn) for _ in range(2))
        print(json.dumps({"way": name, "bytes": size, "cold_GBps": round(size / cold / 1e9, 2),
                          "warm_GBps_best_of_2": round(size / warm / 1e9, 2)}), flush=True)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "write":
        write(sys.argv[2], sys.argv[3])
    elif cmd == "verify":
        sys.exit(verify(sys.argv[2], sys.argv[3]))
    elif cmd == "bench":
        bench(sys.argv[2])
    else:
        sys.exit(f"unknown command {cmd}")
