"""A training loop with memguard phases and torch.cuda.nvtx ranges, for the GPU acceptance suite.

usage: phases_train.py RESULT.json [--steps N]      (under LD_PRELOAD=libmemguard.so)

After one warm-up step, each measured step is an NVTX push/pop range "nvtx step <i>" holding three
memguard phases, "step <i>/forward", "step <i>/backward", "step <i>/optimizer"; the optimizer
step is also an NVTX start/end range "optimizer range <i>"; each step starts with an empty cache.
Around each memguard phase the script
takes PyTorch's own figures: torch.cuda.reset_peak_memory_stats() and memory_allocated() /
memory_reserved() / requested bytes at entry, max_memory_allocated() / max_memory_reserved() /
peak requested bytes at exit (after a synchronize). Allocated bytes count whole allocator blocks
(a block is not split when less than 1 MiB would remain, so it can exceed the tensor by up to
that); requested bytes are the tensors' own sizes. Writes them to RESULT.json. The allocation sequence does not depend on the data, so
a run with PYTORCH_NO_CUDA_MEMORY_CACHING=1 makes the same tensors (then PyTorch's counters stay 0:
the uncached path bypasses its statistics).
"""
import json
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch
import torch.nn as nn

import memguard  # provided by libmemguard.so


class Mlp(nn.Module):
    def __init__(self, width=2048, depth=4, vocab=1000):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, vocab)

    def forward(self, x):
        for layer in self.layers:
            x = nn.functional.gelu(layer(x))
        return self.head(x)


class Measured:
    """A memguard phase with PyTorch's figures taken around it."""

    def __init__(self, name, rows):
        self.name, self.rows = name, rows

    def __enter__(self):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        self.allocated_entry = torch.cuda.memory_allocated()
        self.reserved_entry = torch.cuda.memory_reserved()
        self.requested_entry = torch.cuda.memory_stats().get("requested_bytes.all.current", 0)
        self.phase = memguard.phase(self.name)
        self.phase.__enter__()
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize()
        self.phase.__exit__(*exc)
        stats = torch.cuda.memory_stats()
        self.rows.append({
            "name": self.name,
            "allocated_entry": self.allocated_entry,
            "allocated_peak": torch.cuda.max_memory_allocated(),
            "reserved_entry": self.reserved_entry,
            "reserved_peak": torch.cuda.max_memory_reserved(),
            "requested_entry": self.requested_entry,
            "requested_peak": stats.get("requested_bytes.all.peak", 0),
        })
        return False


def main():
    out = sys.argv[1]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 3
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = Mlp().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator(device="cpu").manual_seed(1)
    rows, losses, nvtx_names = [], [], []

    def batch():
        x = torch.randn(512, 2048, generator=gen).to(dev)
        y = torch.randint(0, 1000, (512,), generator=gen).to(dev)
        return x, y

    x, y = batch()  # warm-up: optimizer state, cuBLAS workspace
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    del x, y
    for i in range(1, steps + 1):
        x, y = batch()
        # Without this the warm-up's cached segments would serve every step and the reserve would
        # never grow inside a phase (nothing for the segment-level comparison to see).
        torch.cuda.empty_cache()
        nvtx_names.append(f"nvtx step {i}")
        with torch.cuda.nvtx.range(f"nvtx step {i}"):
            with Measured(f"step {i}/forward", rows):
                loss = nn.functional.cross_entropy(model(x), y)
            with Measured(f"step {i}/backward", rows):
                loss.backward()
            rid = torch.cuda.nvtx.range_start(f"optimizer range {i}")
            nvtx_names.append(f"optimizer range {i}")
            with Measured(f"step {i}/optimizer", rows):
                opt.step()
                opt.zero_grad(set_to_none=True)
            torch.cuda.nvtx.range_end(rid)
        losses.append(loss.item())
        del x, y, loss
    torch.cuda.synchronize()
    memguard.flush()
    with open(out, "w") as f:
        json.dump({"rows": rows, "losses": [float(v).hex() for v in losses], "nvtx": nvtx_names,
                   "torch": torch.__version__, "report": memguard.report_path(),
                   "uncached": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "") not in ("", "0"),
                   "tid": __import__("threading").get_native_id()}, f)


if __name__ == "__main__":
    main()
