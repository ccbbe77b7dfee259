"""A two-rank DDP training loop for the GPU acceptance suite (per-rank reports, memguard merge).

usage: python -m torch.distributed.run --standalone --nproc_per_node 2 ddp_small.py RESULT_PREFIX [--steps N]

Each rank trains a small MLP with a rank-dependent batch (rank r uses 256 * (r + 1) rows, so the
ranks' peaks differ) and writes RESULT_PREFIX.<rank>.json with its torch.cuda.max_memory_allocated()
and max_memory_reserved().
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    prefix = sys.argv[1]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 5
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 2048)).cuda(),
                device_ids=[local_rank])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rows = 256 * (rank + 1)
    losses = []
    for _ in range(steps):
        x = torch.randn(rows, 2048, device="cuda")
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    torch.cuda.synchronize()
    dist.barrier()
    result = {"rank": rank, "world_size": dist.get_world_size(), "pid": os.getpid(),
              "max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved(),
              "losses": [float(v).hex() for v in losses], "torch": torch.__version__}
    dist.destroy_process_group()
    with open(f"{prefix}.{rank}.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
