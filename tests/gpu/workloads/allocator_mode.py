"""Allocator-mode workloads for the GPU acceptance suite: run once with
MEMGUARD_ALLOCATOR=memguard and once without, and compared by tests/gpu/checks/allocator_mode.py.

usage: allocator_mode.py RESULT.json SCENARIO [--steps N]

Scenarios (each writes JSON to RESULT.json, always with "backend": the allocator PyTorch uses):
  train    the deterministic TinyGPT loop of train_small.py: losses (float.hex) and stats
  graphs   torch.cuda.graph capture and replay, two graphs sharing one pool (pool=), and
           make_graphed_callables: replay outputs (float.hex of sums)
  compile  torch.compile default mode, forward and backward: losses
  stats    known allocations: memory_allocated/max/reserved/reset_peak_memory_stats, and, at a
           flushed point, the report's size so that the check can sum its records up to there
  oom      a memory fraction of 2 GiB; a loop whose reference cycles hold 256 MiB CUDA tensors
           (automatic collection off): where (if) torch raised, then one hopeless allocation
  byhand   [--lib PATH] torch.cuda.memory.CUDAPluggableAllocator(PATH, "memguard_alloc",
           "memguard_free") set by hand (no LD_PRELOAD); without --lib, PyTorch's allocator
"""
import ctypes
import gc
import json
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_small import TinyGPT  # noqa: E402

MIB = 1 << 20


def memguard():
    """libmemguard.so's C API when preloaded, else None."""
    lib = ctypes.CDLL(None)
    try:
        lib.memguard_flush.restype = ctypes.c_int
        lib.memguard_report_path.restype = ctypes.c_size_t
        lib.memguard_report_path.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        return lib
    except AttributeError:
        return None


def report_size():
    lib = memguard()
    if lib is None or lib.memguard_flush() != 0:
        return None, None
    buf = ctypes.create_string_buffer(4096)
    lib.memguard_report_path(buf, len(buf))
    path = buf.value.decode()
    return path, os.path.getsize(path)


def deterministic():
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def train(steps, compiled=False):
    deterministic()
    dev = torch.device("cuda")
    model = TinyGPT().to(dev)
    step_model = torch.compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator(device="cpu").manual_seed(1)
    losses = []
    for _ in range(steps):
        tokens = torch.randint(0, 1024, (16, 129), generator=gen).to(dev)
        logits = step_model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.item()).hex())
    torch.cuda.synchronize()
    return {"losses": losses, "max_memory_allocated": torch.cuda.max_memory_allocated(),
            "max_memory_reserved": torch.cuda.max_memory_reserved()}


def graphs():
    deterministic()
    dev = torch.device("cuda")
    a = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256)).to(dev)
    b = nn.Sequential(nn.Linear(256, 256), nn.Tanh()).to(dev)
    x = torch.randn(64, 256, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):  # warm-up on a side stream, as the docs prescribe
            b(a(x))
    torch.cuda.current_stream().wait_stream(s)
    g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.no_grad():
        with torch.cuda.graph(g1):
            y1 = a(x)
        with torch.cuda.graph(g2, pool=g1.pool()):  # the second graph shares the first one's pool
            y2 = b(y1)
    outs = []
    for i in range(5):
        x.copy_(torch.randn(64, 256, device=dev, generator=torch.Generator(device=dev).manual_seed(i)))
        g1.replay()
        g2.replay()
        torch.cuda.synchronize()
        outs.append([float(y1.sum().item()).hex(), float(y2.sum().item()).hex()])
    # make_graphed_callables: forward and backward graphs in one shared pool.
    c = nn.Sequential(nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 256)).to(dev)
    inp = torch.randn(32, 256, device=dev, requires_grad=True)
    gc_c = torch.cuda.make_graphed_callables(c, (inp,))
    grads = []
    for i in range(3):
        z = torch.randn(32, 256, device=dev, generator=torch.Generator(device=dev).manual_seed(10 + i),
                        requires_grad=True)
        gc_c(z).sum().backward()
        grads.append(float(z.grad.sum().item()).hex())
    del g1, g2, y1, y2
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return {"replays": outs, "graphed_grads": grads, "reserved_after_release": torch.cuda.memory_reserved()}


def stats():
    dev = torch.device("cuda")
    torch.cuda.init()
    base = torch.cuda.memory_allocated()
    t = torch.empty(10 * MIB, dtype=torch.uint8, device=dev)
    u = torch.empty(1000, dtype=torch.uint8, device=dev)
    after = torch.cuda.memory_allocated()
    peak_after = torch.cuda.max_memory_allocated()
    path, size = report_size()
    at_flush = {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}
    del t
    after_free = torch.cuda.memory_allocated()
    peak_kept = torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    peak_reset = torch.cuda.max_memory_allocated()
    s = torch.cuda.memory_stats()
    keys = ["allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
            "active_bytes.all.current", "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"]
    del u
    torch.cuda.empty_cache()
    return {"base": base, "after": after, "peak_after": peak_after, "after_free": after_free,
            "peak_kept": peak_kept, "peak_reset": peak_reset, "stats": {k: s.get(k) for k in keys},
            "reserved_after_empty": torch.cuda.memory_reserved(), "report": path, "report_size": size,
            "at_flush": at_flush, "max_reserved": torch.cuda.max_memory_reserved()}


class Node:
    """A reference cycle holding a CUDA tensor."""

    def __init__(self, nbytes):
        self.t = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        self.me = self


def oom(iterations=40):
    torch.cuda.init()
    total = torch.cuda.mem_get_info()[1]
    torch.cuda.set_per_process_memory_fraction(2 * 1024 * MIB / total)
    gc.disable()  # cycles stay until a collection that someone runs
    done, error = 0, None
    for i in range(iterations):
        try:
            Node(256 * MIB)  # unreachable at once, held by its cycle
            done += 1
        except torch.cuda.OutOfMemoryError as e:
            error = ("OutOfMemoryError", str(e).splitlines()[0][:300])
            break
    gc.collect()
    hopeless = None
    try:
        torch.empty(4 * 1024 * MIB, dtype=torch.uint8, device="cuda")
    except Exception as e:  # noqa: BLE001: which type PyTorch raises is what the check looks at
        hopeless = (type(e).__name__, str(e).splitlines()[0][:300], f"{type(e).__module__}.{type(e).__qualname__}",
                    isinstance(e, torch.cuda.OutOfMemoryError))
    still_works = float(torch.ones(1024, device="cuda").sum().item())
    gc.enable()
    return {"done": done, "iterations": iterations, "error": error, "hopeless": hopeless,
            "still_works": still_works, "num_ooms": torch.cuda.memory_stats().get("num_ooms")}


def byhand(lib):
    """The exported functions used by hand, without LD_PRELOAD (and without the other hooks)."""
    if lib:
        alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "memguard_alloc", "memguard_free")
        torch.cuda.memory.change_current_allocator(alloc)
    deterministic()
    x = torch.randn(1024, 1024, device="cuda")
    y = torch.relu(x @ x.T)
    z = [torch.empty(n, device="cuda") for n in (1, 1000, 1 << 20, 5 << 20)]
    del z
    torch.cuda.synchronize()
    return {"result": float(y.sum().item()).hex(), "allocated": torch.cuda.memory_allocated() if not lib else None}


def main():
    out, scenario = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 50
    if scenario == "train":
        result = train(steps)
    elif scenario == "compile":
        result = train(min(steps, 10), compiled=True)
    elif scenario == "graphs":
        result = graphs()
    elif scenario == "stats":
        result = stats()
    elif scenario == "oom":
        result = oom()
    elif scenario == "byhand":
        result = byhand(sys.argv[sys.argv.index("--lib") + 1] if "--lib" in sys.argv else None)
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    result["backend"] = torch.cuda.memory.get_allocator_backend()
    result["torch"] = torch.__version__
    result["cxx11_abi"] = bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
