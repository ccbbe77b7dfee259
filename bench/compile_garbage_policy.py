"""Explicit collections for compile garbage: memguard's policy versus the seed's approach.

usage: python3 bench/compile_garbage_policy.py --lib build/lib/libmemguard.so [--reps 3] [--json OUT]

Workload (CPU): LAYERS blocks of --sub layers (default 1), each layer compiled on its own with
torch.compile and a backend that
leaves compile garbage the way compile_garbage.py does (a cycle holding the compile's frames and a
1 MiB tensor, reachable until the compiled code first runs, promoted to the oldest generation by
dynamo's gc.collect(1)); every layer has a graph break (two graphs) and its own activation, so
every layer compiles. Each block runs under reentrant activation checkpointing, so it compiles in
the forward (no_grad) and recompiles in backward's recompute (grad mode). A sequence of calls
with new batch sizes under dynamic=False, then the same layers re-wrapped with dynamic=True (the
dynamic-shape toggle: new compiles), then further new sizes and a repeated one.

Arms (fresh processes, alternated, `--reps` each):
  memguard  LD_PRELOAD=libmemguard.so, the hook on, plain torch.utils.checkpoint;
  seed      LD_PRELOAD=libmemguard.so with MEMGUARD_COLLECT_COMPILE_GARBAGE=0, and the seed's
            approach in this script: its own dynamo end-of-compile callback sets a pending flag;
            a wrapper around every checkpointed call (block) runs gc.collect() at the call's entry and at
            its return whenever the flag is set (and clears it).
Measured with a gc.callbacks entry (start to stop of each collection, perf_counter_ns): the number
and total time of the policy's collections (memguard's: matched to the report's `Y ... memguard`
records; the seed's: those its wrapper ran), and the held tensors still alive when each layer's
backward starts and after each call (both arms must free the same).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

LAYERS = 6
WIDTH = 128
HOLD = 1 << 18  # floats: 1 MiB per compile
SCHEDULE = [(16, False), (24, False), (16, False), (32, False), (40, True), (48, True), (40, True), (56, True)]


def worker(arm, out_path, sub):
    import gc
    import threading

    import torch
    import torch.nn as nn
    import torch.utils.checkpoint as cp

    import childlib

    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch._dynamo.config.recompile_limit = 1024
    torch._dynamo.config.accumulated_recompile_limit = 1024
    backend = childlib.LeakyBackend(HOLD)
    state = {"seed_collecting": False, "t0": 0}
    events = []

    def gc_cb(phase, info):
        if phase == "start":
            state["t0"] = time.perf_counter_ns()
            return
        events.append({"generation": info["generation"], "collected": info["collected"],
                       "uncollectable": info["uncollectable"], "tid": threading.get_native_id(),
                       "duration_ns": time.perf_counter_ns() - state["t0"], "seed": state["seed_collecting"]})

    pending = [False]
    if arm == "seed":
        import torch._dynamo.callback as cb
        cb.callback_handler.register_end_callback(lambda a: pending.__setitem__(0, True))

    def seed_collect():
        if pending[0]:
            pending[0] = False
            state["seed_collecting"] = True
            gc.collect()
            state["seed_collecting"] = False

    @torch._dynamo.disable
    def graph_break():
        pass

    alive_at_backward = []

    class CheckAtBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            alive_at_backward.append(backend.alive())
            return g

    class Layer(nn.Module):
        def __init__(self, act):
            super().__init__()
            self.lin, self.act = nn.Linear(WIDTH, WIDTH), act

        def forward(self, x):
            h = self.act(self.lin(x))
            graph_break()
            return h * torch.sigmoid(h) + x

    # a distinct activation type per layer: no layer reuses another's compiled code
    acts = [nn.Tanh, nn.GELU, nn.SiLU, nn.Softplus, nn.ELU, nn.Mish, nn.Sigmoid, nn.ReLU, nn.LeakyReLU,
            nn.Hardtanh, nn.CELU, nn.SELU, nn.Softsign, nn.Tanhshrink, nn.Hardswish, nn.Hardsigmoid,
            nn.LogSigmoid, nn.ReLU6]
    assert LAYERS * sub <= len(acts)
    layers = [[acts[i * sub + j]() for j in range(sub)] for i in range(LAYERS)]
    layers = [[Layer(a) for a in block] for block in layers]  # LAYERS blocks of `sub` layers

    def run_layer(block, x):
        for layer in block:
            x = layer(x)
        return CheckAtBackward.apply(x)

    def run_layer_seed(layer, x):
        seed_collect()  # at the checkpointed call's entry
        y = run_layer(layer, x)
        seed_collect()  # at its return
        return y

    fn = run_layer_seed if arm == "seed" else run_layer
    gc.callbacks.append(gc_cb)
    calls = []
    compiled, mode = None, None
    t_start = time.perf_counter_ns()
    for batch, dynamic in SCHEDULE:
        if mode != dynamic:  # the dynamic-shape toggle: wrap again
            compiled = [[torch.compile(l, backend=backend, dynamic=dynamic) for l in b] for b in layers]
            mode = dynamic
        alive_at_backward.clear()
        n = len(backend.leaked)
        t0 = time.perf_counter_ns()
        h = torch.randn(batch, WIDTH).requires_grad_()
        for c in compiled:
            h = cp.checkpoint(fn, c, h, use_reentrant=True)
        loss = h.pow(2).mean()
        loss.backward()
        del h
        calls.append({"batch": batch, "dynamic": dynamic, "compiles": len(backend.leaked) - n,
                      "alive_at_backward": list(alive_at_backward), "alive_after": backend.alive(),
                      "loss": float(loss).hex(), "ms": (time.perf_counter_ns() - t0) / 1e6})
    total_ms = (time.perf_counter_ns() - t_start) / 1e6
    gc.callbacks.remove(gc_cb)
    with open(out_path, "w") as f:
        json.dump({"arm": arm, "calls": calls, "events": events, "total_ms": total_ms,
                   "compiles": len(backend.leaked)}, f)


def align(events, ys):
    key = lambda d: (d["tid"], d["generation"], d["collected"], d["uncollectable"])  # noqa: E731
    want = [key(e) for e in events]
    starts = [k for k in range(len(ys) - len(want) + 1) if [key(y) for y in ys[k:k + len(want)]] == want]
    if len(starts) != 1:
        raise SystemExit(f"cannot match the gc events to the report ({len(starts)} places)")
    return ys[starts[0]:starts[0] + len(want)]


def run_arm(arm, args, workdir, rep):
    import harness
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith(("MEMGUARD_", "TORCH"))}
    env.update({"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "LD_PRELOAD": os.path.abspath(args.lib),
                "MEMGUARD_OUTPUT": os.path.join(workdir, f"{arm}{rep}.%p.mgr"), "PYTHONHASHSEED": "0"})
    if arm == "seed":
        env["MEMGUARD_COLLECT_COMPILE_GARBAGE"] = "0"
    out = os.path.join(workdir, f"{arm}{rep}.json")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", arm, out, str(args.sub)], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"arm {arm} failed:\n{p.stderr[-4000:]}")
    with open(out) as f:
        r = json.load(f)
    if arm == "seed":
        policy = [e for e in r["events"] if e["seed"]]
    else:
        reports = [os.path.join(workdir, n) for n in os.listdir(workdir) if n.startswith(f"{arm}{rep}.") and n.endswith(".mgr")]
        ys = align(r["events"], harness.Report(reports[0]).Y)
        policy = [e for e, y in zip(r["events"], ys) if y["trigger"] == "memguard"]
    auto_full = [e for e in r["events"] if e["generation"] == 2 and not e["seed"] and e not in policy]
    return {"collections": len(policy), "total_ms": sum(e["duration_ns"] for e in policy) / 1e6,
            "automatic_full": len(auto_full), "compiles": r["compiles"], "run_ms": r["total_ms"],
            "alive_at_backward": [c["alive_at_backward"] for c in r["calls"]],
            "alive_after": [c["alive_after"] for c in r["calls"]],
            "compiles_per_call": [c["compiles"] for c in r["calls"]],
            "losses": [c["loss"] for c in r["calls"]]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", nargs=3)
    p.add_argument("--sub", type=int, default=1, help="separately compiled layers per checkpointed block")
    p.add_argument("--lib", default=os.path.join(HERE, "..", "build", "lib", "libmemguard.so"))
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--json")
    args = p.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], int(args.worker[2]))
        return
    res = {"memguard": [], "seed": []}
    with tempfile.TemporaryDirectory(prefix="mg-bench-") as workdir:
        for rep in range(args.reps):
            for arm in (("memguard", "seed") if rep % 2 == 0 else ("seed", "memguard")):
                res[arm].append(run_arm(arm, args, workdir, rep))
    m, s = res["memguard"], res["seed"]
    same = all(a[k] == b[k] for a in m for b in s for k in ("alive_at_backward", "alive_after", "compiles_per_call", "losses"))
    print(f"host: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs; python {platform.python_version()}; "
          f"{LAYERS} checkpointed blocks of {args.sub} compiled layer(s), {len(SCHEDULE)} calls, "
          f"{args.reps} processes per arm, alternated")
    print(f"compiles per call: {m[0]['compiles_per_call']} (total {m[0]['compiles']})")
    print(f"held tensors alive at each layer's backward, per call: memguard {m[0]['alive_at_backward']}, seed {s[0]['alive_at_backward']}")
    print(f"held tensors alive after each call: memguard {m[0]['alive_after']}, seed {s[0]['alive_after']}")
    print(f"same held tensors freed at the same points, same compiles and losses in every process: {same}")
    print("| policy | collections per run | total collection time per run (ms), mean ± sd | per collection (ms) "
          "| automatic full collections | run time (ms) |")
    print("|---|---|---|---|---|---|")
    summary = {}
    for arm, rows in (("memguard", m), ("seed", s)):
        tot = [r["total_ms"] for r in rows]
        n = statistics.fmean(r["collections"] for r in rows)
        t, sd = statistics.fmean(tot), (statistics.stdev(tot) if len(tot) > 1 else 0.0)
        summary[arm] = {"collections": n, "total_ms": t, "sd_ms": sd, "runs": rows}
        print(f"| {arm} | {n:g} | {t:.0f} ± {sd:.0f} | {t / n if n else 0:.1f} | "
              f"{statistics.fmean(r['automatic_full'] for r in rows):g} | {statistics.fmean(r['run_ms'] for r in rows):.0f} |")
    ratio = summary["memguard"]["total_ms"] / summary["seed"]["total_ms"]
    print(f"memguard / seed collection time: {ratio:.2f} (target: at most 0.33)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "ratio": ratio, "same_release": same}, f, indent=1)


if __name__ == "__main__":
    main()
