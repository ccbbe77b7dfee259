"""Workloads of the GPU part `cycles` (issue 21): garbage cycles after recompute, at steps, and the
time budget of memguard's collections.

usage: cycles.py RESULT.json SCENARIO [--device cuda|cpu] [--layers N] [--tokens N] [--hidden N]
                 [--iterations N] [--steps N] [--leak-mib M] [--heap-objects N] [--seconds S]

Scenarios (each writes what the check compares the report with into RESULT.json):
  recompute  Megatron-style full recompute: --layers layers, each an MLP checkpointed through a
             `CheckpointFunction(torch.autograd.Function)` of Megatron-LM's shape (forward under
             no_grad saves the inputs; backward recomputes under enable_grad and runs
             torch.autograd.backward on the recomputed outputs). Its backward leaves the recomputed
             activations in a reference cycle and promotes it to the oldest
             generation (a generation-1 collection while it is still reachable), as a busy program's
             collector would: only a full collection frees it. Deterministic algorithms. Result per
             iteration: the loss, the backward's incremental peak (CUDA), and at each layer's
             backward whether the previous layer's cycle was still alive and in generation 2;
             after the last iteration a SHA-256 of every gradient.
  periodic   a training loop with SGD (memguard's optimizer hooks find the steps) whose every step
             leaves one cycle holding a --leak-mib MiB CUDA tensor, promoted to the oldest generation.
             Result: per step, how many of the leaked tensors were alive after optimizer.step()
             returned; the bytes per step; the line that allocates the leaked tensor. The program
             ends with an explicit gc.collect(), which frees what is left.
  budget     a Python heap of --heap-objects live containers and --layers checkpointed layers run
             for --seconds: every layer's backward is a chance for the recompute trigger, and its
             collections free nothing but scan the whole heap. Result: the chances (recomputed
             backwards), the loop's wall time, and a full collection's time on this heap.

--device cpu runs every scenario with tiny sizes (the sizes are arguments): the dry run of the
part on a machine without a GPU, where the CUDA figures are absent from the result.
"""
import gc
import hashlib
import json
import os
import sys
import time
import weakref

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def arg(name, default):
    return type(default)(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


DEVICE = arg("--device", "cuda")
LINES = {}


def here(name):
    """Records the line after the caller's under `name`: the user's line a check looks for."""
    LINES[name] = sys._getframe(1).f_lineno + 1


def cuda():
    return DEVICE == "cuda"


def sync():
    if cuda():
        torch.cuda.synchronize()


class MLP(nn.Module):
    """A transformer's MLP block; records its activations in `recorded` while grad is enabled (the
    recompute: the forward runs under no_grad)."""

    def __init__(self, hidden, recorded):
        super().__init__()
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)
        self.recorded = recorded

    def forward(self, x):
        a = self.up(x)
        g = torch.nn.functional.gelu(a)
        out = self.down(g) + x
        if torch.is_grad_enabled() and self.recorded is not None:
            self.recorded.extend((a, g))
        return out


class Cycle:
    """What a real program leaves by mistake: an object that refers to itself."""


class Recompute:
    """The checkpointing of one run: a Megatron-LM-shaped CheckpointFunction whose backward leaves
    (when `leak`) the recomputed activations in a cycle of the oldest generation."""

    def __init__(self, leak, on_backward=None):
        self.leak = leak
        self.recorded = []   # the activations of the recompute in progress (MLP.forward adds them)
        self.cycles = []     # weak references to the cycles left, oldest first
        self.held_bytes = []  # per cycle: the CUDA bytes it holds
        self.chances = 0     # recomputed backwards (each one a chance for memguard's trigger)
        self.on_backward = on_backward
        self.function = self._make_function()

    def _make_function(self):
        run = self

        class CheckpointFunction(torch.autograd.Function):  # Megatron-LM's tensor_parallel.random shape
            @staticmethod
            def forward(ctx, run_function, *args):
                ctx.run_function = run_function
                with torch.no_grad():
                    outputs = run_function(*args)
                ctx.save_for_backward(*args)
                return outputs

            @staticmethod
            def backward(ctx, *grads):
                run.chances += 1
                if run.on_backward is not None:
                    run.on_backward()
                inputs = ctx.saved_tensors
                detached = [x.detach().requires_grad_(x.requires_grad) for x in inputs]
                with torch.enable_grad():
                    outputs = ctx.run_function(*detached)
                if isinstance(outputs, torch.Tensor):
                    outputs = (outputs,)
                if run.leak:
                    run.leave_cycle(outputs)
                run.recorded.clear()
                torch.autograd.backward(outputs, grads)
                return (None,) + tuple(x.grad for x in detached)

        return CheckpointFunction

    def leave_cycle(self, outputs):
        # The context stays out of it: with ctx.cycle = c as well, a full collection after the
        # backward freed only the last layer's cycle (torch 2.13 on the CPU): the collector does not
        # see the C++ references between a context and its node.
        c = Cycle()
        c.self = c
        c.activations = list(outputs) + list(self.recorded)
        held = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in c.activations}
        self.held_bytes.append(sum(held.values()))
        self.cycles.append(weakref.ref(c))
        # Promote it while it is still reachable: a generation-1 collection moves the survivors of
        # the young generations to the oldest one, where only a full collection looks.
        keep = [c]
        del c
        gc.collect(1)
        del keep


def in_oldest_generation(obj):
    return any(o is obj for o in gc.get_objects(generation=2))


def recompute(result):
    layers_n = arg("--layers", 6)
    tokens = arg("--tokens", 4096)
    hidden = arg("--hidden", 4096)
    iterations = arg("--iterations", 2)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    probes = []

    def probe():
        # At a layer's backward: is the cycle the previous layer's backward left still alive, and
        # in the oldest generation? (The first backward of an iteration has no previous layer.)
        if run.chances % layers_n == 1 or not run.cycles:
            return
        c = run.cycles[-1]()
        probes[-1].append({"alive": c is not None, "oldest": c is not None and in_oldest_generation(c)})
        del c

    run = Recompute(leak=True, on_backward=probe)
    layers = [MLP(hidden, run.recorded).to(DEVICE) for _ in range(layers_n)]
    x = torch.randn(tokens, hidden, device=DEVICE, requires_grad=True)
    result.update(losses=[], backward_peak=[], probes=[], alive_after=[], allocated_before_backward=[])
    for _ in range(iterations):
        for layer in layers:
            layer.zero_grad(set_to_none=True)
        x.grad = None
        probes.append([])
        h = x
        for layer in layers:
            h = run.function.apply(layer, h)
        loss = h.float().pow(2).mean()
        sync()
        if cuda():
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            result["allocated_before_backward"].append(before)
        loss.backward()
        sync()
        if cuda():
            result["backward_peak"].append(torch.cuda.max_memory_allocated() - before)
        result["losses"].append(float(loss.item()).hex())
        result["probes"].append(probes[-1])
        del h, loss
        result["alive_after"].append(sum(1 for r in run.cycles if r() is not None))
        gc.collect()  # between iterations: each one starts from the same memory
    digest = hashlib.sha256()
    for t in [p.grad for layer in layers for p in layer.parameters()] + [x.grad]:
        digest.update(t.detach().cpu().contiguous().numpy().tobytes())
    result["grads_sha256"] = digest.hexdigest()
    result["held_bytes_per_layer"] = run.held_bytes[:layers_n]
    result["chances"] = run.chances


def periodic(result):
    steps = arg("--steps", 8)
    leak_mib = arg("--leak-mib", 256)
    hidden = arg("--hidden", 1024)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden)).to(DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, hidden, device=DEVICE)
    leaked = []
    result.update(alive_after_step=[], losses=[])
    for _ in range(steps):
        loss = model(x).pow(2).mean()
        loss.backward()
        c = Cycle()
        c.self = c
        here("leak")
        c.tensor = torch.empty(leak_mib << 20, dtype=torch.uint8, device=DEVICE).fill_(1)
        leaked.append(weakref.ref(c.tensor))
        keep = [c]
        del c
        gc.collect(1)  # the cycle reaches the oldest generation while reachable
        del keep
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        result["alive_after_step"].append(sum(1 for r in leaked if r() is not None))
        result["losses"].append(float(loss.item()).hex())
    result["bytes_per_step"] = leak_mib << 20
    result["alive_at_end"] = sum(1 for r in leaked if r() is not None)
    gc.collect()  # the program's own collection frees what the steps left
    sync()
    result["alive_after_collect"] = sum(1 for r in leaked if r() is not None)


def budget(result):
    layers_n = arg("--layers", 6)
    tokens = arg("--tokens", 2048)
    hidden = arg("--hidden", 2048)
    seconds = arg("--seconds", 20.0)
    n = arg("--heap-objects", 2_000_000)
    heap = [[i] for i in range(n)]  # a large program's live Python objects (all tracked by the collector)
    gc.collect()
    t0 = time.perf_counter()
    gc.collect()
    result["full_collection_s"] = time.perf_counter() - t0
    torch.manual_seed(0)
    run = Recompute(leak=False)
    layers = [MLP(hidden, None).to(DEVICE) for _ in range(layers_n)]
    x = torch.randn(tokens, hidden, device=DEVICE, requires_grad=True)
    sync()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        h = x
        for layer in layers:
            h = run.function.apply(layer, h)
        h.float().pow(2).mean().backward()
        sync()
    result["loop_s"] = time.perf_counter() - t0
    result["chances"] = run.chances
    result["heap_objects"] = len(heap)


def main():
    out, scenario = sys.argv[1], sys.argv[2]
    result = {"scenario": scenario, "device": DEVICE, "file": os.path.abspath(__file__)}
    t0 = time.perf_counter()
    {"recompute": recompute, "periodic": periodic, "budget": budget}[scenario](result)
    result["run_s"] = time.perf_counter() - t0
    result["lines"] = LINES
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
