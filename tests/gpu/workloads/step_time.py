"""Warm training-step time of a compiled GPT-style model (benchmark for docs/benchmarks.md).

usage: step_time.py RESULT.json [--steps N]

Compiles (torch.compile default mode), warms up, then times N steps with CUDA events. Also counts
garbage collections per warm step and times the two ways to read PyTorch's allocated-bytes counter
(torch.cuda.memory_allocated() and the raw torch._C._cuda_memoryStats that memguard reads around
each collection).
"""
import gc
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from train_small import TinyGPT  # noqa: E402


def main():
    out = sys.argv[1]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 50
    torch.manual_seed(0)
    model = TinyGPT(d_model=1024, layers=8, heads=16, seq=256).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step_fn = torch.compile(model)
    tokens = torch.randint(0, 1024, (16, 257), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = step_fn(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    collections = [0]
    gc.callbacks.append(lambda phase, info: collections.__setitem__(0, collections[0] + (phase == "stop")))
    times = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    t0 = time.perf_counter()
    for _ in range(1000):
        torch.cuda.memory_allocated()
    counter_us = (time.perf_counter() - t0) * 1e3  # 1000 calls: ms total = us per call
    t0 = time.perf_counter()
    for _ in range(1000):
        torch._C._cuda_memoryStats(torch._C._cuda_getDevice())["allocated_bytes"]["all"]["current"]
    raw_counter_us = (time.perf_counter() - t0) * 1e3
    with open(out, "w") as f:
        json.dump({"step_ms": times, "collections_per_step": collections[0] / steps,
                   "memory_allocated_us": counter_us, "raw_counter_us": raw_counter_us}, f)


if __name__ == "__main__":
    main()
