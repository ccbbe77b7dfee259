"""torch.empty + free latency in one process, for bench/alloc_timing/run.sh.

usage: python3 lat.py ARM   (ARM floor installs $FLOOR_LIB through CUDAPluggableAllocator; any
other arm takes whatever allocator the environment gives: LD_PRELOAD and MEMGUARD_ALLOCATOR)
Prints the arm, the allocator backend and the median ns per torch.empty + free of 5 x 100000 for
512 B and 1 MiB, after a warm-up; pinned to cores 4 and 5.
"""
import os
import sys
import time

os.sched_setaffinity(0, {4, 5})
import torch  # noqa: E402

arm = sys.argv[1]
if arm == "floor":
    torch.cuda.memory.change_current_allocator(
        torch.cuda.memory.CUDAPluggableAllocator(os.environ["FLOOR_LIB"], "floor_alloc", "floor_free"))
dev = torch.device("cuda")
res = []
for n in (512, 1 << 20):
    for _ in range(2000):
        x = torch.empty(n, dtype=torch.uint8, device=dev)
        del x
    runs = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(100000):
            x = torch.empty(n, dtype=torch.uint8, device=dev)
            del x
        runs.append((time.perf_counter_ns() - t0) / 100000)
    res.append(f"{n}: {sorted(runs)[2]:.0f}")
print(arm, torch.cuda.memory.get_allocator_backend(), " ".join(res), flush=True)
