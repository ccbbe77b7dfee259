"""Compile garbage with per-layer torch.compile and reentrant checkpointing (seed 000's shape).

usage: compile_garbage.py RESULT.json [--device cuda|cpu] [--layers N] [--hold-mib M] [--frame-locals]

Every compile leaves garbage the way dynamo did in the seed: the backend keeps the frames of the
compile together with an M MiB real tensor it allocated (as autotuning and constant folding do) in
a reference cycle. The cycle stays reachable until the compiled code first runs, and a
generation-1 collection meanwhile (dynamo's own post-compile gc.collect(1) has the same effect)
promotes it to the oldest generation; from then on it is garbage that only a full collection
frees. The first (cold) call compiles each layer in forward (checkpoint runs it under no_grad) and
recompiles it in backward's recompute (grad-mode guard). Writes the losses, the cold call's
incremental peak (CUDA), and how many of the held tensors were still alive when each layer's
backward started and after the call.

--frame-locals: the backend's own frame holds the tensor in its local `scratch` (its frame is in the
list of frames it keeps, a cycle), as the seed's frame locals held the activations; without it a
dict of the cycle holds it.
"""
import gc
import json
import sys
import weakref

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp


def arg(name, default):
    return type(default)(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


DEVICE = arg("--device", "cuda")
LAYERS = arg("--layers", 4)
HOLD_MIB = arg("--hold-mib", 256)
FRAME_LOCALS = "--frame-locals" in sys.argv

leaked = []             # weak references to the real tensors the leaked frames hold
alive_at_backward = []  # per layer backward: how many of them were still alive


keepalive = []  # compile state that is reachable until the compiled code first runs


def leaky_backend(gm, example_inputs):
    # Keep every frame of the traced call in a reference cycle (as dynamo's guard tracebacks did).
    frame = sys._getframe()
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    scratch = torch.ones(HOLD_MIB << 18, device=example_inputs[0].device)
    leaked.append(weakref.ref(scratch))
    cycle = {"frames": frames, "scratch": scratch}
    cycle["self"] = cycle
    keepalive.append(cycle)
    if FRAME_LOCALS:
        del cycle["scratch"], frame, cycle  # this frame's locals `frames` and `scratch` stay
    else:
        del frame, frames, cycle, scratch
    gc.collect(1)  # survivors of a generation-1 collection move to the oldest generation

    def run(*args):
        keepalive.clear()  # from here on the cycle is garbage
        return gm.forward(*args)

    return run


@torch._dynamo.disable
def graph_break():
    pass


class Layer(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x):
        h = torch.tanh(self.lin(x))
        graph_break()  # two compiled graphs per layer, as with real models' graph breaks
        return h * torch.sigmoid(h)


class CheckAtBackward(torch.autograd.Function):
    """Identity whose backward records how many held tensors are still alive."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        alive_at_backward.append(sum(1 for r in leaked if r() is not None))
        return g


def run_layer(layer, x):
    return CheckAtBackward.apply(layer(x))


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    width = 1024
    layers = [Layer(width).to(DEVICE) for _ in range(LAYERS)]
    compiled = [torch.compile(l, backend=leaky_backend, dynamic=False) for l in layers]
    x = torch.randn(256, width, device=DEVICE)
    results = {"device": DEVICE}
    for call in range(2):
        leaked.clear()
        alive_at_backward.clear()
        if DEVICE == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
        h = x.clone().requires_grad_()
        for c in compiled:
            h = cp.checkpoint(run_layer, c, h, use_reentrant=True)
        loss = h.float().pow(2).mean()
        loss.backward()
        results[f"call{call}_loss"] = float(loss.item()).hex()
        results[f"call{call}_alive_at_backward"] = list(alive_at_backward)
        if DEVICE == "cuda":
            torch.cuda.synchronize()
            results[f"call{call}_incremental_peak"] = torch.cuda.max_memory_allocated() - before
        del h, loss
        results[f"call{call}_leaked"] = len(leaked)
        results[f"call{call}_alive_after"] = sum(1 for r in leaked if r() is not None)
    gc.collect()
    with open(out, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
