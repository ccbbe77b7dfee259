"""Workloads of issue 20's GPU checks: steps, categories and out-of-memory explained.

usage: insight.py RESULT.json SCENARIO [--steps N]

Scenarios (each writes what the check compares the report with into RESULT.json):
  oom         the classic bug: losses summed with their autograd graphs (`total_loss += loss`, no
              backward) under a per-process memory fraction, until PyTorch raises OutOfMemoryError.
              Result: the line numbers of the forward and of the accumulation, the OOM's message.
  train       a small transformer trained with AdamW for N steps. Result: the storage bytes of the
              parameters, their gradients and the optimizer state after the last step (deduplicated
              by data pointer, as the categories count them), and the losses.
  leak        a loop whose every step leaves one reference cycle holding a 16 MiB CUDA tensor (the
              collector is off, as a cycle that reached the oldest generation would be). Result: the
              line that allocates the leaked tensor, the bytes per step.
  stale_grad  a leaf tensor that is not a parameter takes part in every step; its .grad is never
              cleared. Result: its gradient's bytes.
"""
import gc
import json
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

LINES = {}


def here(name):
    """Records the line after the caller's under `name`: the user's line the check looks for."""
    LINES[name] = sys._getframe(1).f_lineno + 1


def storage_bytes(tensors):
    seen = {}
    for t in tensors:
        if t is None or not t.is_cuda:
            continue
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values()), len(seen)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 8, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x):
        h = self.n1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.n2(x))


class Model(nn.Module):
    def __init__(self, d=512, layers=4, vocab=2048):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def batch(gen, n=16, seq=128, vocab=2048):
    return torch.randint(0, vocab, (n, seq + 1), generator=gen).cuda()


def loss_of(model, tokens):
    logits = model(tokens[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def scenario_oom(result, steps):
    torch.cuda.init()
    torch.cuda.set_per_process_memory_fraction(0.02)  # about 2.8 GB of an H200
    model = Model().cuda()
    gen = torch.Generator().manual_seed(0)
    total_loss = 0
    message = None
    n = 0
    try:
        for n in range(1, 100000):
            tokens = batch(gen)
            here("forward")
            loss = loss_of(model, tokens)
            here("accumulate")
            total_loss += loss  # the bug: every step's graph stays alive through total_loss
    except torch.OutOfMemoryError as e:
        message = str(e).splitlines()[0]
    result.update(oom=message is not None, message=message, iterations=n)


def scenario_train(result, steps):
    torch.manual_seed(0)
    model = Model().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        loss = loss_of(model, batch(gen))
        opt.zero_grad(set_to_none=False)  # gradients stay allocated: the same at every step's peak
        loss.backward()
        opt.step()
        losses.append(loss.item())
    torch.cuda.synchronize()
    params = list(model.parameters())
    state = [v for p in params for v in opt.state[p].values() if isinstance(v, torch.Tensor)]
    result.update(losses=losses,
                  parameters=storage_bytes(params),
                  gradients=storage_bytes([p.grad for p in params]),
                  optimizer_state=storage_bytes(state),
                  buffers=storage_bytes(list(model.buffers())))


class Holder:
    def __init__(self, t):
        self.t = t
        self.me = self  # a reference cycle: only the collector frees it


def scenario_leak(result, steps):
    gc.disable()
    model = nn.Linear(1024, 1024).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        x = torch.randn(64, 1024, device="cuda")
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
        here("leak")
        Holder(torch.empty(4 << 20, device="cuda"))  # 16 MiB, left in a cycle
    torch.cuda.synchronize()
    result.update(bytes_per_step=16 << 20)


def scenario_stale_grad(result, steps):
    model = nn.Linear(1024, 1024).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    here("scale")
    scale = torch.ones(1024, 1024, device="cuda", requires_grad=True)  # a leaf, not a parameter
    for _ in range(steps):
        x = torch.randn(64, 1024, device="cuda")
        (model(x) @ scale).square().mean().backward()  # scale.grad accumulates, never cleared
        opt.step()
        opt.zero_grad()
    torch.cuda.synchronize()
    result.update(stale_grad=storage_bytes([scale.grad]))


def main():
    out, scenario = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 6
    result = {"scenario": scenario, "file": os.path.abspath(__file__)}
    globals()["scenario_" + scenario](result, steps)
    result["lines"] = LINES
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
