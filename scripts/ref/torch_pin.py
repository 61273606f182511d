"""torch_pin: how fast PyTorch pins a large arena, the peer of `pinpool
arena`, and a neighbour process that measures what any growth makes other
users of the GPU wait.

  torch_pin.py pin GiB [register]   torch.empty(n, dtype=uint8, pin_memory=True);
                                    with "register", after
                                    _set_allocator_settings('pinned_use_cuda_host_register:True,
                                    pinned_num_register_threads:8'). Prints one JSON
                                    line: way, bytes, took_ns, gb_per_s, close_ns and
                                    the CLOCK_MONOTONIC readings start/made/freed.
                                    PyTorch's caching host allocator rounds a block
                                    up to a power of two (96 GiB would pin 128), so
                                    a size that is not one is made as one tensor
                                    per power of two in it (96 GiB: 64 + 32).
  torch_pin.py neighbour OUT.json   until SIGTERM: every 200 us a 64 KiB pinned
                                    copy to the device on its own stream, timed to
                                    its completion, and one torch.cuda.mem_get_info()
                                    (cuMemGetInfo) every 2 ms; then writes the
                                    samples (CLOCK_MONOTONIC start ns, latency ns).
  torch_pin.py split OUT.json ROUNDS.jsonl
                                    the neighbour's p50/p99/max for each round's
                                    reservation and free window (and, for
                                    arena.cpp's phased rows, ARENA_JSON=, its
                                    prefault and registration apart).

The neighbour runs in its own process, so that the Go and the Python rounds
are measured by the same neighbour. Run by scripts/gpu-run.sh (ARENA=).
"""
import json
import signal
import sys
import time

import torch


def pin(gib, register):
    if register:
        torch.cuda.memory._set_allocator_settings(
            "pinned_use_cuda_host_register:True,pinned_num_register_threads:8")
    torch.cuda.init()
    torch.empty(1, device="cuda")
    n = int(gib * (1 << 30))
    parts = [1 << b for b in range(n.bit_length() - 1, -1, -1) if n >> b & 1]
    start = time.monotonic_ns()
    ts = [torch.empty(k, dtype=torch.uint8, pin_memory=True) for k in parts]
    made = time.monotonic_ns()
    assert all(t.is_pinned() for t in ts)
    del ts
    if hasattr(torch._C, "_host_emptyCache"):
        torch._C._host_emptyCache()  # the caching host allocator keeps freed blocks
    freed = time.monotonic_ns()
    way = "torch:register8" if register else "torch:pin_memory"
    print(json.dumps({"way": way, "bytes": n, "took_ns": made - start,
                      "gb_per_s": n / (made - start), "close_ns": freed - made,
                      "start_mono_ns": start, "made_mono_ns": made, "freed_mono_ns": freed}), flush=True)


def neighbour(out):
    torch.cuda.init()
    src = torch.empty(64 << 10, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(64 << 10, dtype=torch.uint8, device="cuda")
    s = torch.cuda.Stream()
    copies, infos = [], []
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    print("ready", flush=True)
    nxt = time.monotonic_ns()
    last_info = 0
    while not stop:
        nxt += 200_000
        now = time.monotonic_ns()
        if nxt > now:
            time.sleep((nxt - now) / 1e9)
        else:
            nxt = now
        t0 = time.monotonic_ns()
        with torch.cuda.stream(s):
            dst.copy_(src, non_blocking=True)
        s.synchronize()
        copies.append((t0, time.monotonic_ns() - t0))
        if t0 - last_info > 2_000_000:
            last_info = t0
            torch.cuda.mem_get_info()
            infos.append((t0, time.monotonic_ns() - t0))
    with open(out, "w") as f:
        json.dump({"copies": copies, "mem_get_info": infos}, f)


def stats(samples, lo, hi):
    # A sample belongs to the window it started in, and one that started
    # before it but ended inside it (a copy stalled across the start).
    l = sorted(d for t, d in samples if lo <= t < hi or t < lo < t + d)
    if not l:
        return None
    return {"count": len(l), "p50_ns": l[len(l) // 2], "p99_ns": l[int(0.99 * (len(l) - 1))], "max_ns": l[-1]}


def split(out, rounds):
    nb = json.load(open(out))
    for line in open(rounds):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if not r.get("start_mono_ns"):
            continue
        row = {"way": r["way"], "bytes": r["bytes"]}
        windows = [("grow", r["start_mono_ns"], r["made_mono_ns"]),
                   ("free", r["made_mono_ns"], r["freed_mono_ns"])]
        if r.get("prefaulted_mono_ns"):  # arena.cpp's phased rows: the two phases apart
            windows += [("prefault", r["start_mono_ns"], r["prefaulted_mono_ns"]),
                        ("register", r["prefaulted_mono_ns"], r["made_mono_ns"])]
        for key, lo, hi in windows:
            row[key + "_copy"] = stats(nb["copies"], lo, hi)
            row[key + "_meminfo"] = stats(nb["mem_get_info"], lo, hi)
        print(json.dumps(row))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "pin":
        pin(float(sys.argv[2]), len(sys.argv) > 3 and sys.argv[3] == "register")
    elif cmd == "neighbour":
        neighbour(sys.argv[2])
    elif cmd == "split":
        split(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: torch_pin.py pin GiB [register] | neighbour OUT.json | split OUT.json ROUNDS.jsonl")
