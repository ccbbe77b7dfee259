"""A small GPT-like transformer trained under torchrun with DDP or FSDP2, for the multi-GPU acceptance.

usage: python -m torch.distributed.run --standalone --nproc-per-node 2 dist_train.py RESULT_PREFIX
           [--mode ddp|fsdp2] [--compile] [--steps N] [--warmup N] [--batch B] [--heavy-rank R]
           [--heavy-factor F] [--oom-rank R] [--device cuda|cpu] [--backend nccl|gloo]

Each rank trains the same model (fixed seed) on its own deterministic batches (a generator seeded
by the rank and step), with torch.use_deterministic_algorithms(True): two runs of one arm give
bitwise-equal losses. The caller sets CUBLAS_WORKSPACE_CONFIG=:4096:8 (set here too when absent).

--heavy-rank R: rank R uses a batch --heavy-factor times larger (default 4), so its activations,
                and its peak, grow.
--oom-rank R:   after training and a barrier, rank R alone allocates past its GPU's memory, catches
                torch.OutOfMemoryError and records the message; every rank then exits cleanly.
                CUDA only (on CPU there is no device memory to exhaust: "oom": "skipped on cpu").
--device cpu:   the gloo backend on CPU, to check this script without a GPU.
--inductor-cache DIR: TORCHINDUCTOR_CACHE_DIR=DIR/rank<R> (a fresh cache per process, set before
                torch is imported).
--backend:      default nccl on CUDA, gloo on CPU. gloo on CUDA lets several ranks share a GPU
                (NCCL refuses two ranks on one device), for jobs of more ranks than GPUs.

Writes RESULT_PREFIX.<rank>.json: losses as float.hex(), step_times_s (every step), step_time_s
(the median of the steps after --warmup), max_memory_allocated/max_memory_reserved (CUDA only),
pid, rank, world_size, device, the OOM message (null if none).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
if "--inductor-cache" in sys.argv:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(sys.argv[sys.argv.index("--inductor-cache") + 1],
                                                         "rank" + os.environ.get("RANK", "0"))

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 4096
SEQ = 256


class Block(nn.Module):
    """Pre-norm attention (written out: matmul, causal mask, softmax) and an MLP."""

    def __init__(self, d_model, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.up = nn.Linear(d_model, 4 * d_model)
        self.down = nn.Linear(4 * d_model, d_model)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        scores = scores.masked_fill(mask[:t, :t], float("-inf"))
        att = scores.softmax(dim=-1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class SmallGPT(nn.Module):
    def __init__(self, d_model=768, layers=4, heads=12):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Parameter(torch.randn(1, SEQ, d_model) * 0.02)
        self.blocks = nn.ModuleList(Block(d_model, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, VOCAB)
        self.register_buffer("mask", torch.ones(SEQ, SEQ, dtype=torch.bool).triu(1), persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        for block in self.blocks:
            x = block(x, self.mask)
        return self.head(self.norm(x))


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("prefix")
    ap.add_argument("--mode", choices=("ddp", "fsdp2"), default="ddp")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=3, help="steps left out of the median step time")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heavy-rank", type=int, default=-1)
    ap.add_argument("--heavy-factor", type=int, default=4)
    ap.add_argument("--oom-rank", type=int, default=-1)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--backend", choices=("nccl", "gloo"), default=None)
    ap.add_argument("--inductor-cache", default=None, help="read before torch is imported (above)")
    return ap.parse_args()


def main():
    args = parse()
    local_rank = int(os.environ["LOCAL_RANK"])
    backend = args.backend or ("nccl" if args.device == "cuda" else "gloo")
    if args.device == "cuda":
        dev = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        # device_id binds NCCL's communicator to the rank's GPU at once (gloo takes none).
        dist.init_process_group(backend, device_id=dev if backend == "nccl" else None)
    else:
        dev = torch.device("cpu")
        dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)

    model = SmallGPT().to(dev)
    if args.mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[dev.index] if args.device == "cuda" else None)
    else:
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
    if args.compile:
        model = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    batch = args.batch * (args.heavy_factor if rank == args.heavy_rank else 1)
    losses, times = [], []
    for step in range(args.steps):
        gen = torch.Generator().manual_seed(1000 * rank + step)
        tokens = torch.randint(0, VOCAB, (batch, SEQ + 1), generator=gen).to(dev)
        if args.device == "cuda":
            torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())  # synchronizes with the device
        times.append(time.perf_counter() - t0)
        del logits, loss, tokens
    dist.barrier()

    result = {"rank": rank, "world_size": world, "pid": os.getpid(), "mode": args.mode, "compile": args.compile,
              "device": str(dev), "backend": backend, "batch": batch, "losses": [float(v).hex() for v in losses],
              "step_times_s": times, "step_time_s": statistics.median(times[args.warmup:] or times),
              "torch": torch.__version__, "oom": None}
    if args.device == "cuda":
        torch.cuda.synchronize(dev)
        result["max_memory_allocated"] = torch.cuda.max_memory_allocated(dev)
        result["max_memory_reserved"] = torch.cuda.max_memory_reserved(dev)
    if rank == args.oom_rank:
        if args.device != "cuda":
            result["oom"] = "skipped on cpu"
        else:
            total = torch.cuda.get_device_properties(dev).total_memory
            try:
                # More bytes than the device has: PyTorch's allocator fails, frees its cache, retries
                # and raises.
                big = torch.empty(total + (1 << 30), dtype=torch.uint8, device=dev)
                del big
                result["oom"] = "no OutOfMemoryError"
            except torch.OutOfMemoryError as e:
                result["oom"] = str(e)
            result["oom_request_bytes"] = total + (1 << 30)
    dist.barrier()
    dist.destroy_process_group()
    with open(f"{args.prefix}.{rank}.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
