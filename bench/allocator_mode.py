"""Allocator mode (MEMGUARD_ALLOCATOR=memguard) against PyTorch's own CUDA caching allocator, on a GPU.

usage: python3 bench/allocator_mode.py --lib build/lib/libmemguard.so [--quick] [--reps 3]
                                       [--json OUT.json]

Every measurement runs in a fresh process; the arms alternate within each repetition (the order
rotates from one repetition to the next), all in one run. Arms:
  native        no LD_PRELOAD: PyTorch's allocator
  history       no LD_PRELOAD, torch.cuda.memory._record_memory_history(stacks="all") (PyTorch's own
                full tracking: native and Python stacks on every block)
  memguard      LD_PRELOAD, MEMGUARD_ALLOCATOR=memguard (full tracking: native and Python stacks
                and a report record on every block)
  mg_nostack    LD_PRELOAD, MEMGUARD_ALLOCATOR=memguard, MEMGUARD_STACK_DEPTH=0,
                MEMGUARD_PYTHON_STACKS=0 (the allocator with records but no stacks)
Benchmarks:
  latency   torch.empty(n, uint8, device="cuda") then del, for n from 512 B to 256 MiB: median ns
            per allocation+free over --iters iterations (after a warm-up that fills the cache)
  step      a GPT-style transformer training step (bf16 autocast, AdamW), eager and
            torch.compile default mode: median step time and torch.cuda.max_memory_reserved()
Prints a markdown table per benchmark with the ratio of each arm to `native`; tracking overhead is
history/native for PyTorch and memguard/mg_nostack for memguard.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SIZES = [512, 4096, 65536, 1 << 20, 16 << 20, 256 << 20]
ARMS = ("native", "history", "memguard", "mg_nostack")


def worker(spec):
    import torch
    import torch.nn as nn
    if spec["arm"] == "history":
        torch.cuda.memory._record_memory_history(stacks="all", max_entries=100000)
    dev = torch.device("cuda")
    out = {"backend": torch.cuda.memory.get_allocator_backend()}
    if spec["bench"] == "latency":
        lat = {}
        for n in SIZES:
            for _ in range(50):  # warm: the first allocation of a size makes its segment
                x = torch.empty(n, dtype=torch.uint8, device=dev)
                del x
            iters = spec["iters"] if n < (16 << 20) else max(spec["iters"] // 10, 100)
            t0 = time.perf_counter_ns()
            for _ in range(iters):
                x = torch.empty(n, dtype=torch.uint8, device=dev)
                del x
            lat[str(n)] = (time.perf_counter_ns() - t0) / iters
        out["latency_ns"] = lat
        return out
    # step: a GPT-style decoder-only block stack
    torch.manual_seed(0)
    d, layers, heads, seq, batch, vocab = spec["d"], spec["layers"], 16, spec["seq"], spec["batch"], 32000

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, mask):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False, is_causal=True)[0]
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.zeros(1, seq, d))
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.head = nn.Linear(d, vocab, bias=False)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

        def forward(self, t):
            x = self.emb(t) + self.pos
            for b in self.blocks:
                x = b(x, self.mask)
            return self.head(x)

    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step_model = torch.compile(model) if spec["compiled"] else model
    tokens = torch.randint(0, vocab, (batch, seq + 1), device=dev)
    times = []
    for i in range(spec["warmup"] + spec["steps"]):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = step_model(tokens[:, :-1])
            loss = nn.functional.cross_entropy(logits.float().reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= spec["warmup"]:
            times.append((time.perf_counter_ns() - t0) / 1e6)
    out["step_ms"] = statistics.median(times)
    out["max_reserved"] = torch.cuda.max_memory_reserved()
    out["max_allocated"] = torch.cuda.max_memory_allocated()
    return out


def run_one(args, spec):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    for k in list(env):
        if k.startswith("MEMGUARD_"):
            del env[k]
    if spec["arm"] in ("memguard", "mg_nostack"):
        env["LD_PRELOAD"] = os.path.abspath(args.lib)
        env["MEMGUARD_ALLOCATOR"] = "memguard"
        env["MEMGUARD_OUTPUT"] = os.path.join(args.tmp, "bench.%p.mgr")
        if spec["arm"] == "mg_nostack":
            env["MEMGUARD_STACK_DEPTH"] = "0"
            env["MEMGUARD_PYTHON_STACKS"] = "0"
    with tempfile.NamedTemporaryFile("r", suffix=".json", dir=args.tmp, delete=False) as f:
        path = f.name
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec), path], env=env,
                       capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        raise SystemExit(f"worker {spec} failed:\n{p.stderr[-3000:]}")
    with open(path) as f:
        result = json.load(f)
    want = "pluggable" if spec["arm"] in ("memguard", "mg_nostack") else "native"
    if result["backend"] != want:
        raise SystemExit(f"arm {spec['arm']} ran with the {result['backend']} allocator\n{p.stderr[-2000:]}")
    for name in os.listdir(args.tmp):
        if name.endswith(".mgr"):
            os.unlink(os.path.join(args.tmp, name))
    return result


def rotated(reps):
    for r in range(reps):
        yield [ARMS[(i + r) % len(ARMS)] for i in range(len(ARMS))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/lib/libmemguard.so")
    ap.add_argument("--quick", action="store_true", help="a short version (fewer repetitions, iterations, steps)")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        result = worker(json.loads(args.worker[0]))
        with open(args.worker[1], "w") as f:
            json.dump(result, f)
        return
    reps = args.reps or (1 if args.quick else 3)
    args.tmp = tempfile.mkdtemp(prefix="mgbench.")
    iters = 2000 if args.quick else 20000
    step = {"d": 1024, "layers": 4 if args.quick else 12, "seq": 1024, "batch": 8,
            "warmup": 3 if args.quick else 10, "steps": 5 if args.quick else 30}
    results = {"latency": {a: [] for a in ARMS}, "eager": {a: [] for a in ARMS}, "compiled": {a: [] for a in ARMS}}
    for order in rotated(reps):
        for arm in order:
            results["latency"][arm].append(run_one(args, {"arm": arm, "bench": "latency", "iters": iters}))
        for compiled in (False, True):
            for arm in order:
                if compiled and arm == "history":
                    continue  # history's cost is measured on the eager step
                spec = dict(step, arm=arm, bench="step", compiled=compiled)
                results["compiled" if compiled else "eager"][arm].append(run_one(args, spec))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)

    def med(values):
        return statistics.median(values) if values else float("nan")

    print(f"\n### Allocation + free latency through torch.empty (median ns, {reps} process(es) per arm)\n")
    print("| size | " + " | ".join(ARMS) + " | memguard / native | history / native |")
    print("|---|" + "---|" * (len(ARMS) + 2))
    for n in SIZES:
        m = {a: med([r["latency_ns"][str(n)] for r in results["latency"][a]]) for a in ARMS}
        print(f"| {n} | " + " | ".join(f"{m[a]:.0f}" for a in ARMS) +
              f" | {m['memguard'] / m['native']:.3f} | {m['history'] / m['native']:.3f} |")
    for kind in ("eager", "compiled"):
        print(f"\n### GPT-style training step, {kind} (bf16 autocast, AdamW; median of per-process medians)\n")
        print("| arm | step ms | ratio | max reserved MiB | ratio |")
        print("|---|---|---|---|---|")
        base = results[kind]["native"]
        b_ms, b_res = med([r["step_ms"] for r in base]), med([r["max_reserved"] for r in base])
        for a in ARMS:
            rs = results[kind][a]
            if not rs:
                continue
            ms, res = med([r["step_ms"] for r in rs]), med([r["max_reserved"] for r in rs])
            print(f"| {a} | {ms:.2f} | {ms / b_ms:.3f} | {res / 2**20:.0f} | {res / b_res:.3f} |")
    e = results["eager"]
    ov_torch = med([r["step_ms"] for r in e["history"]]) / med([r["step_ms"] for r in e["native"]])
    ov_mg = med([r["step_ms"] for r in e["memguard"]]) / med([r["step_ms"] for r in e["mg_nostack"]])
    lat = results["latency"]
    l_torch = med([r["latency_ns"]["4096"] for r in lat["history"]]) / med([r["latency_ns"]["4096"] for r in lat["native"]])
    l_mg = med([r["latency_ns"]["4096"] for r in lat["memguard"]]) / med([r["latency_ns"]["4096"] for r in lat["mg_nostack"]])
    print("\n### Tracking overhead (full native + Python stacks on every block)\n")
    print("| tracker | eager step ratio | 4 KiB alloc+free ratio |")
    print("|---|---|---|")
    print(f"| PyTorch _record_memory_history(stacks=\"all\") vs native | {ov_torch:.3f} | {l_torch:.3f} |")
    print(f"| memguard full tracking vs memguard without stacks | {ov_mg:.3f} | {l_mg:.3f} |")


if __name__ == "__main__":
    main()
