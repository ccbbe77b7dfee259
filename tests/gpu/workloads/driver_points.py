"""Driver entry points: a small training loop that stops at several points and notes, at each, what PyTorch's
allocator says (memory_reserved, memory_allocated) and how far memguard's report had got (its size
right after memguard_flush()), so the check can replay the report up to each point.

usage: driver_points.py RESULT.json [--steps N]
Run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True or backend:cudaMallocAsync.
"""
import ctypes
import json
import os
import sys

import torch
import torch.nn as nn


def main():
    out = sys.argv[1]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 4
    lib = ctypes.CDLL(None)
    try:
        flush = lib.memguard_flush
        report_path = lib.memguard_report_path
        report_path.restype = ctypes.c_size_t
    except AttributeError:
        flush = report_path = None
    points = []

    def point(label):
        torch.cuda.synchronize()
        entry = {"label": label, "reserved": torch.cuda.memory_reserved(), "allocated": torch.cuda.memory_allocated()}
        if flush is not None and flush() == 0:
            buf = ctypes.create_string_buffer(4096)
            report_path(buf, 4096)
            entry["report"] = buf.value.decode()
            entry["offset"] = os.path.getsize(entry["report"])
        points.append(entry)
        print(json.dumps(entry), flush=True)

    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(),
                          nn.Linear(4096, 1024)).to(dev)
    point("model")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(steps):
        # Growing batches make the allocator grow its segments between points.
        x = torch.randn(256 * (step + 1), 1024, device=dev)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        point(f"step {step}")
        del x, loss
    big = torch.empty(300 << 20, dtype=torch.uint8, device=dev)
    point("big tensor")
    del big
    point("big freed")
    torch.cuda.empty_cache()
    point("empty_cache")
    del model, opt
    torch.cuda.empty_cache()
    point("all freed")
    with open(out, "w") as f:
        json.dump({"points": points, "torch": torch.__version__,
                   "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}, f)


if __name__ == "__main__":
    main()
