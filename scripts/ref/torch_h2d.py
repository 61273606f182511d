"""torch_h2d: how fast PyTorch moves a CPU tensor in ordinary (pageable)
memory to the GPU, the peer of pinpool's staged copy of a []byte:

  pageable          dst.copy_(src): the driver's copy of pageable memory
  pin_memory+copy   src.pin_memory() then dst.copy_(pinned, non_blocking=True),
                    what a DataLoader with pin_memory=True does per batch
  pinned            dst.copy_(pinned, non_blocking=True) of an already pinned
                    tensor: the link, for reference

Median GB/s of warm repetitions, wall time to torch.cuda.synchronize().
Run on the GPU host by scripts/gpu-run.sh (REF=torch_h2d).
"""
import statistics
import sys
import time

import torch


def gbps(size, fn, reps):
    fn()
    torch.cuda.synchronize()
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        rates.append(size / (time.perf_counter() - t0) / 1e9)
    return statistics.median(rates)


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
    for mib in (64, 256):
        size = mib << 20
        src = torch.empty(size, dtype=torch.uint8)
        src.fill_(7)
        pinned = src.pin_memory()
        dst = torch.empty(size, dtype=torch.uint8, device="cuda")
        ways = {
            "pageable": lambda: dst.copy_(src),
            "pin_memory+copy": lambda: dst.copy_(src.pin_memory(), non_blocking=True),
            "pinned": lambda: dst.copy_(pinned, non_blocking=True),
        }
        for name, fn in ways.items():
            print(f"size={mib}MiB torch {name}: {gbps(size, fn, reps):.1f} GB/s", flush=True)
        dst.zero_()
        dst.copy_(src)
        if not torch.equal(dst.cpu(), src):
            print(f"size={mib}MiB: the copy differs from the source")
            sys.exit(1)


if __name__ == "__main__":
    main()
