"""Steps, categories and out-of-memory context on a real GPU (issue 20), for the acceptance suite.

usage: insight_records.py RESULT.json train|oom      (under LD_PRELOAD=libmemguard.so)

train  a small transformer trained with AdamW for 5 steps (no memguard call: the steps are found
       through PyTorch's optimizer hooks); writes the real tensors' storage bytes per category
       (CUDA storages, deduplicated by data pointer) and the parameters' data pointers.
oom    the classic bug: losses summed with their graphs (`total_loss += loss`, no backward) under
       torch.cuda.set_per_process_memory_fraction until PyTorch raises OutOfMemoryError (caught);
       writes the iteration, the limit and the device's total.
"""
import json
import sys

import torch
import torch.nn as nn


def storage(t):
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


def sums(tensors):
    seen = {}
    for t in tensors:
        if t is not None and t.is_cuda:
            ptr, n = storage(t)
            seen[ptr] = n
    return seen


def train(result):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first=True)
    model = nn.Sequential(nn.Embedding(1000, 256), nn.TransformerEncoder(layer, num_layers=2),
                          nn.Linear(256, 1000)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(5):
        x = torch.randint(0, 1000, (8, 64), device="cuda")
        opt.zero_grad()
        loss = model(x).float().logsumexp(-1).mean()
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    params = sums(model.parameters())
    grads = sums(p.grad for p in model.parameters())
    state = sums(v for st in opt.state.values() for v in st.values() if torch.is_tensor(v))
    result.update(steps=5, parameter_bytes=sum(params.values()), gradient_bytes=sum(grads.values()),
                  optimizer_state_bytes=sum(state.values()), parameter_ptrs=sorted(params),
                  parameter_count=len(params))


def oom(result):
    torch.manual_seed(0)
    total = torch.cuda.get_device_properties(0).total_memory
    fraction = (4 << 30) / total
    torch.cuda.set_per_process_memory_fraction(fraction, 0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(4096, 4096), nn.GELU()) for _ in range(4)]).cuda()
    total_loss = 0
    i = 0
    try:
        for i in range(1, 10_000):
            x = torch.randn(512, 4096, device="cuda")
            loss = model(x).pow(2).mean()
            total_loss += loss  # the bug: every iteration's graph (and its activations) stays alive
    except torch.cuda.OutOfMemoryError as e:
        result["oom"] = str(e)[:300]
    result.update(iterations=i, total=total, fraction=fraction, limit=int(fraction * total),
                  saved_tensor_data=hasattr(torch._C._autograd.SavedTensor, "data"))


def main():
    out, scenario = sys.argv[1], sys.argv[2]
    result = {"torch": torch.__version__, "scenario": scenario}
    {"train": train, "oom": oom}[scenario](result)
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
