"""Driver entry points: a real step that makes NCCL and cuBLAS allocate device memory of their own: a one-rank
NCCL process group (init_method file://, one GPU) with an all_reduce, and matmuls (cuBLAS/cuBLASLt
handles and workspaces).

usage: nccl_cublas.py RESULT.json
"""
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist


def main():
    out = sys.argv[1]
    dev = torch.device("cuda:0")
    torch.cuda.set_device(dev)
    store = os.path.join(tempfile.mkdtemp(prefix="mg-nccl-"), "store")
    dist.init_process_group("nccl", init_method=f"file://{store}", rank=0, world_size=1, device_id=dev)
    a = torch.randn(2048, 2048, device=dev)
    b = torch.randn(2048, 2048, device=dev)
    c = a @ b  # cuBLAS
    h = torch.randn(64, 512, 1024, device=dev, dtype=torch.bfloat16)
    w = torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16, requires_grad=True)
    y = torch.nn.functional.linear(h, w)  # cuBLASLt
    y.float().sum().backward()
    x = torch.ones(1 << 22, device=dev)
    dist.all_reduce(x)  # NCCL
    torch.cuda.synchronize()
    total = float(x[0].item()) + float(c.sum().item())
    dist.destroy_process_group()
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                   "check": total}, f)


if __name__ == "__main__":
    main()
