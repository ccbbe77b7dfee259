"""Time in memguard's collections per cold compile sequence, against the seed's approach.

usage: python3 bench/gpu/gc_compile_sequence.py [--lib build/lib/libmemguard.so | --cli VENV/bin/memguard]
           [--reps 3] [--device cuda|cpu] [--backend inductor] [--layers 4] [--width 2048]
           [--heap-objects 2000000] [--workdir DIR] [--json OUT]

The model: --layers layers (each with its own activation, so that none reuses another's compiled
code), each compiled on its own with torch.compile, each called through reentrant activation
checkpointing (torch.utils.checkpoint, use_reentrant=True): a layer compiles in the forward (under
no_grad) and again in backward's recompute (grad mode), as in ART's per-layer compile. The program
keeps --heap-objects live Python containers, as a large framework does: every full collection scans
them. One process runs one cold compile sequence: calls with batch sizes 1024, 1536, 1024, 2048
(new shapes: recompiles, automatic dynamic shapes), then a warm call, each a forward, a loss and a
backward.

Arms, in fresh processes, alternated (memguard first in even repetitions, the seed first in odd
ones), each with a fresh TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR (cold compiles every time):
  memguard  LD_PRELOAD=libmemguard.so (or `memguard run --`) with its defaults: the collections after
            a compile, after each recomputed backward, the budget and the explanations. Timed from the
            report's Y records of memguard's triggers (memguard, recompute, step): their durations.
  seed      without memguard, the seed's approach (ART's PR): a dynamo end-of-compile callback marks
            garbage pending; the checkpointed call runs gc.collect() at its entry and at its return
            while a mark is pending (each mark collected once). Timed by a gc.callbacks entry around
            the collections the wrapper ran.
Both arms also record every other collection (automatic, the program's), the CUDA bytes each
policy's collections freed, the sequence's wall time and the losses (which must be equal).

Prints a table per arm, the ratio memguard / seed of the collection time per sequence (per
repetition pair: mean, standard deviation, range) and this command line. --json writes it all.
"""
import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCHEDULE = [1024, 1536, 1024, 2048, 2048]  # batch sizes; the last call is warm
MEMGUARDS = ("memguard", "recompute", "step")


def worker(arm, out_path, a):
    import gc
    import threading

    import torch
    import torch.nn as nn
    import torch.utils.checkpoint as cp

    heap = [{"i": i} for i in range(a.heap_objects)]  # a large program's live Python objects
    gc.collect()
    torch.manual_seed(0)
    torch._dynamo.config.recompile_limit = 64
    device = a.device
    state = {"seed": False, "t0": 0, "alloc0": 0}
    events = []

    def allocated():
        return torch.cuda.memory_allocated() if device == "cuda" else 0

    def gc_cb(phase, info):
        if phase == "start":
            state["t0"] = time.perf_counter_ns()
            state["alloc0"] = allocated()
            return
        events.append({"seed": state["seed"], "generation": info["generation"], "collected": info["collected"],
                       "duration_ns": time.perf_counter_ns() - state["t0"], "freed": state["alloc0"] - allocated(),
                       "tid": threading.get_native_id()})

    compiles = [0]
    pending = [False]
    import torch._dynamo.callback as dcb

    def on_compile_end(*args):
        compiles[0] += 1
        pending[0] = True

    dcb.callback_handler.register_end_callback(on_compile_end)

    def seed_collect():
        if arm == "seed" and pending[0] and not torch.compiler.is_compiling():
            pending[0] = False
            state["seed"] = True
            try:
                gc.collect()
            finally:
                state["seed"] = False

    acts = [nn.GELU, nn.SiLU, nn.Tanh, nn.Mish, nn.ELU, nn.Softplus, nn.Sigmoid, nn.Hardswish, nn.CELU, nn.SELU]
    assert a.layers <= len(acts), f"at most {len(acts)} layers"

    class Layer(nn.Module):
        def __init__(self, act):
            super().__init__()
            self.up, self.down, self.act = nn.Linear(a.width, 2 * a.width), nn.Linear(2 * a.width, a.width), act()

        def forward(self, x):
            return x + self.down(self.act(self.up(x)))

    layers = [Layer(acts[i]).to(device) for i in range(a.layers)]
    compiled = [torch.compile(l, backend=a.backend) for l in layers]

    def call(layer, x):
        seed_collect()  # at the checkpointed call's entry
        y = layer(x)
        seed_collect()  # at its return
        return y

    gc.callbacks.append(gc_cb)
    calls = []
    window = [time.time_ns()]
    t_start = time.perf_counter_ns()
    for batch in SCHEDULE:
        c0, t0 = compiles[0], time.perf_counter_ns()
        h = torch.randn(batch, a.width, device=device, requires_grad=True)
        for c in compiled:
            h = cp.checkpoint(call, c, h, use_reentrant=True)
        loss = h.float().pow(2).mean()
        loss.backward()
        if device == "cuda":
            torch.cuda.synchronize()
        calls.append({"batch": batch, "compiles": compiles[0] - c0, "loss": float(loss.item()).hex(),
                      "ms": (time.perf_counter_ns() - t0) / 1e6})
        del h, loss
    total_ms = (time.perf_counter_ns() - t_start) / 1e6
    window.append(time.time_ns())
    gc.callbacks.remove(gc_cb)
    with open(out_path, "w") as f:
        json.dump({"arm": arm, "calls": calls, "events": events, "total_ms": total_ms, "compiles": compiles[0],
                   "window_unix_ns": window,
                   "heap_objects": len(heap), "torch": torch.__version__}, f)


def report_ys(path):
    """The collections in a report: (trigger, duration_ns, cuda_bytes_freed or 0, skipped or 0, end as
    Unix time in ns)."""
    out, t0 = [], 0
    with open(path) as f:
        for line in f:
            if line.startswith("I t0_unix_ns "):
                t0 = int(line.split()[2])
            elif line.startswith("Y "):
                y = line.split()
                num = lambda i: int(y[i]) if len(y) > i and y[i] != "-" else 0  # noqa: E731
                out.append((y[3], int(y[5]), num(8), num(11), t0 + int(y[1])))
    return out


def run_arm(arm, a, workdir, rep, passthrough):
    tag = f"{arm}{rep}"
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith(("MEMGUARD_", "TORCHINDUCTOR_", "TRITON_"))}
    caches = tempfile.TemporaryDirectory(prefix=f"mg-gc-seq-{tag}-")  # cold: new caches, removed after
    env.update({"TORCHINDUCTOR_CACHE_DIR": os.path.join(caches.name, "inductor"),
                "TRITON_CACHE_DIR": os.path.join(caches.name, "triton"),
                "MEMGUARD_OUTPUT": os.path.join(workdir, f"{tag}.%p.mgr"), "PYTHONHASHSEED": "0",
                "MEMGUARD_REPORT_ENCODING": "text"})  # report_ys reads its lines
    if a.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    out = os.path.join(workdir, f"{tag}.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", arm, out, *passthrough]
    if arm == "memguard":
        if a.cli:
            cmd = [a.cli, "run", "--", *cmd]
        else:
            env["LD_PRELOAD"] = os.path.abspath(a.lib)
    t0 = time.perf_counter()
    with caches:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"arm {arm} (rep {rep}) exited {p.returncode}:\n{p.stderr[-4000:]}")
    with open(out) as f:
        r = json.load(f)
    r["process_s"] = time.perf_counter() - t0
    if arm == "seed":
        policy = [(e["duration_ns"], e["freed"], 0) for e in r["events"] if e["seed"]]
        others = [e for e in r["events"] if not e["seed"]]
        triggers = {"seed": len(policy)}
        trigger_ms = {"seed": sum(d for d, _, _ in policy) / 1e6}
    else:
        files = [os.path.join(workdir, n) for n in os.listdir(workdir)
                 if n.startswith(f"{tag}.") and n.endswith(".mgr")]
        if len(files) != 1:
            raise SystemExit(f"arm memguard (rep {rep}): {len(files)} reports, not one (is the library preloaded?)")
        ys = report_ys(files[0])
        policy = [(d, freed, skipped) for t, d, freed, skipped, _ in ys if t in MEMGUARDS]
        triggers, trigger_ms = {}, {}
        for t, d, *_ in ys:
            if t in MEMGUARDS:
                triggers[t] = triggers.get(t, 0) + 1
                trigger_ms[t] = trigger_ms.get(t, 0.0) + d / 1e6
        # the program's own collections during the sequence, as the seed arm's gc.callbacks see them
        start, end = r["window_unix_ns"]
        others = [{"duration_ns": d} for t, d, _, _, at in ys if t not in MEMGUARDS and start <= at <= end]
    return {"collections": len(policy), "total_ms": sum(d for d, _, _ in policy) / 1e6,
            "freed_bytes": sum(f for _, f, _ in policy), "skipped": sum(s for _, _, s in policy),
            "triggers": triggers, "trigger_ms": trigger_ms, "compiles": r["compiles"], "sequence_ms": r["total_ms"],
            "process_s": r["process_s"], "losses": [c["loss"] for c in r["calls"]],
            "compiles_per_call": [c["compiles"] for c in r["calls"]], "call_ms": [c["ms"] for c in r["calls"]],
            "other_collections_ms": sum(e["duration_ns"] for e in others) / 1e6}


def mean_sd(xs):
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--lib", default=os.path.join(ROOT, "build", "lib", "libmemguard.so"))
    p.add_argument("--cli", help="run the memguard arm through this `memguard run --` (an installed wheel)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--backend", default="inductor")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--heap-objects", type=int, default=2_000_000)
    p.add_argument("--workdir", help="where the reports and results go (default: a temporary directory, removed)")
    p.add_argument("--json")
    a = p.parse_args()
    passthrough = ["--device", a.device, "--backend", a.backend, "--layers", str(a.layers), "--width", str(a.width),
                   "--heap-objects", str(a.heap_objects)]
    if a.worker:
        worker(a.worker[0], a.worker[1], a)
        return
    if not a.cli and not os.path.isfile(a.lib):
        raise SystemExit(f"no library {a.lib} (--lib, or --cli for an installed wheel)")
    tmp = None
    if a.workdir:
        os.makedirs(a.workdir, exist_ok=True)
        workdir = a.workdir
    else:
        tmp = tempfile.TemporaryDirectory(prefix="mg-gc-seq-")
        workdir = tmp.name
    res = {"memguard": [], "seed": []}
    for rep in range(a.reps):
        for arm in (("memguard", "seed") if rep % 2 == 0 else ("seed", "memguard")):
            res[arm].append(run_arm(arm, a, workdir, rep, passthrough))
            r = res[arm][-1]
            by = ", ".join(f"{t} {r['triggers'][t]} in {ms:.0f} ms" for t, ms in r["trigger_ms"].items())
            print(f"rep {rep} {arm:8s}: {r['collections']} collections ({by}), {r['total_ms']:.0f} ms, "
                  f"freed {r['freed_bytes'] / 2**20:.0f} MiB, skipped {r['skipped']}; compiles {r['compiles']}; "
                  f"sequence {r['sequence_ms'] / 1e3:.1f} s", flush=True)
    m, s = res["memguard"], res["seed"]
    same = all(x["losses"] == m[0]["losses"] for x in m + s)
    ratios = [x["total_ms"] / y["total_ms"] if y["total_ms"] else float("inf") for x, y in zip(m, s)]
    r_mean, r_sd = mean_sd(ratios)
    try:
        import torch
        tv = torch.__version__
        gpu = torch.cuda.get_device_name(0) if a.device == "cuda" and torch.cuda.is_available() else "-"
    except Exception:
        tv, gpu = "?", "-"
    print(f"\nhost: {platform.node()}, {os.cpu_count()} CPUs, GPU {gpu}; "
          f"python {platform.python_version()}, torch {tv}; "
          f"backend {a.backend}; {a.layers} checkpointed compiled layers of width {a.width}, batch sizes {SCHEDULE}; "
          f"a heap of {a.heap_objects} objects; {a.reps} cold sequences per arm, alternated")
    print(f"compiles per call: memguard {m[0]['compiles_per_call']}, seed {s[0]['compiles_per_call']}; "
          f"losses equal in every process: {same}")
    print("\n| arm | collections per sequence | collection time per sequence (ms), mean ± sd | per collection (ms) "
          "| CUDA freed by them (MiB) | skipped by the budget | other collections (ms) | sequence wall time (s) |")
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for arm, rows in (("memguard", m), ("seed", s)):
        t, sd = mean_sd([r["total_ms"] for r in rows])
        n = statistics.fmean(r["collections"] for r in rows)
        summary[arm] = {"collections": n, "total_ms": t, "sd_ms": sd, "runs": rows}
        print(f"| {arm} | {n:g} | {t:.0f} ± {sd:.0f} | {t / n if n else 0:.1f} | "
              f"{statistics.fmean(r['freed_bytes'] for r in rows) / 2**20:.0f} | "
              f"{statistics.fmean(r['skipped'] for r in rows):g} | "
              f"{statistics.fmean(r['other_collections_ms'] for r in rows):.0f} | "
              f"{statistics.fmean(r['sequence_ms'] for r in rows) / 1e3:.1f} |")
    print(f"\nmemguard / seed collection time per cold compile sequence: {r_mean:.3f} ± {r_sd:.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} pairs)")
    print("command: " + " ".join(shlex.quote(x) for x in [sys.executable, *sys.argv]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"arms": summary, "ratios": ratios, "ratio_mean": r_mean, "ratio_sd": r_sd, "same_losses": same,
                       "command": sys.argv, "schedule": SCHEDULE}, f, indent=1)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
