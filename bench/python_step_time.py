"""Warm step time of a compiled CPU training step with and without memguard's Python hook.

usage: python3 bench/python_step_time.py --lib build/lib/libmemguard.so [--reps 8] [--steps 300]
                                          [--warmup 20] [--json OUT.json]

Arms, each a fresh process, alternated within every repetition (the order rotates from one
repetition to the next), all in one run:
  none      no LD_PRELOAD
  off       LD_PRELOAD=libmemguard.so, MEMGUARD_COLLECT_COMPILE_GARBAGE=0 (accounting only)
  hook      LD_PRELOAD=libmemguard.so (the hook as shipped)
The step: a 4-layer MLP (--width, default 512; --batch, default 64) compiled with backend="aot_eager" (forward through
dynamo and AOTAutograd, backward compiled lazily on the first backward), MSE loss, backward, SGD
step. After the warm-up the worker checks that no compile mark is pending (no C profile function
on the thread, none compiled during the timed steps), then times each step with perf_counter_ns.
Per process: the median step time; per arm: mean and standard deviation of those medians over the
repetitions, the ratio of the means to the `none` arm, and the paired ratio (each process against
the `none` process of the same repetition), mean ± standard deviation.
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

ARMS = ("none", "off", "hook")


def worker(args):
    import gc

    import torch
    import torch.nn as nn

    import childlib  # tests/python: the thread's C profile function

    torch.manual_seed(0)
    torch.set_num_threads(1)
    w = args.width
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(w, w), nn.GELU())])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    step_fn = torch.compile(model, backend="aot_eager")
    x, y = torch.randn(args.batch, w), torch.randn(args.batch, w)
    compiles = []
    import torch._dynamo.callback as cb
    cb.callback_handler.register_end_callback(lambda a: compiles.append(a.compile_id))

    def step():
        loss = nn.functional.mse_loss(step_fn(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    owner = childlib.profile_owner()
    n_compiles = len(compiles)
    collections = [0]
    gc.callbacks.append(lambda phase, info: collections.__setitem__(0, collections[0] + (phase == "stop")))
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter_ns()
        step()
        times.append(time.perf_counter_ns() - t0)
    return {"median_us": statistics.median(times) / 1e3, "mean_us": statistics.fmean(times) / 1e3,
            "profile_after_warmup": owner, "compiles_warmup": n_compiles,
            "compiles_timed": len(compiles) - n_compiles, "gc_per_step": collections[0] / args.steps,
            "memguard_loaded": childlib.memguard_loaded()}


def run_arm(arm, args, workdir):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("MEMGUARD_")}
    env.update({"OMP_NUM_THREADS": "1", "MEMGUARD_OUTPUT": os.path.join(workdir, "r.%p.mgr"),
                "CUDA_VISIBLE_DEVICES": "", "PYTHONHASHSEED": "0"})
    if arm != "none":
        env["LD_PRELOAD"] = os.path.abspath(args.lib)
    if arm == "off":
        env["MEMGUARD_COLLECT_COMPILE_GARBAGE"] = "0"
    out = os.path.join(workdir, f"{arm}.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", out, "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--width", str(args.width), "--batch", str(args.batch)]
    if args.cpu is not None:
        cmd = ["taskset", "-c", str(args.cpu)] + cmd
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        r = json.load(f)
    if r["memguard_loaded"] != (arm != "none"):
        raise SystemExit(f"arm {arm}: libmemguard.so loaded = {r['memguard_loaded']}")
    if r["profile_after_warmup"] != "none" or r["compiles_timed"] != 0:
        raise SystemExit(f"arm {arm}: a mark pending or a compile during the timed steps: {r}")
    return r


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker")
    p.add_argument("--lib", default=os.path.join(HERE, "..", "build", "lib", "libmemguard.so"))
    p.add_argument("--reps", type=int, default=8)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--cpu", type=int, help="pin every worker to this CPU (taskset)")
    p.add_argument("--json")
    args = p.parse_args()
    if args.worker:
        with open(args.worker, "w") as f:
            json.dump(worker(args), f)
        return
    results = {a: [] for a in ARMS}
    with tempfile.TemporaryDirectory(prefix="mg-bench-") as workdir:
        for rep in range(args.reps):
            order = ARMS[rep % 3:] + ARMS[:rep % 3]
            for arm in order:
                results[arm].append(run_arm(arm, args, workdir))
    base = statistics.fmean(r["median_us"] for r in results["none"])
    print(f"host: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs; python {platform.python_version()}; "
          f"{args.reps} repetitions x {args.steps} timed steps after {args.warmup} warm-up steps, arms alternated; "
          f"MLP width {args.width}, batch {args.batch}" + (f", pinned to CPU {args.cpu}" if args.cpu is not None else ""))
    print("| arm | median step (us), mean over processes | std dev (us) | ratio of means to no memguard "
          "| paired ratio per repetition, mean ± sd | gc per step |")
    print("|---|---|---|---|---|---|")
    labels = {"none": "no memguard", "off": "memguard, MEMGUARD_COLLECT_COMPILE_GARBAGE=0", "hook": "memguard, hook on"}
    summary = {}
    for arm in ARMS:
        med = [r["median_us"] for r in results[arm]]
        m, s = statistics.fmean(med), statistics.stdev(med) if len(med) > 1 else 0.0
        gcs = statistics.fmean(r["gc_per_step"] for r in results[arm])
        paired = [r["median_us"] / b["median_us"] for r, b in zip(results[arm], results["none"])]
        pm, ps = statistics.fmean(paired), (statistics.stdev(paired) if len(paired) > 1 else 0.0)
        summary[arm] = {"mean_of_medians_us": m, "stdev_us": s, "ratio": m / base, "gc_per_step": gcs,
                        "paired_ratio_mean": pm, "paired_ratio_sd": ps, "runs": results[arm]}
        print(f"| {labels[arm]} | {m:.1f} | {s:.1f} | {m / base:.3f} | {pm:.3f} ± {ps:.3f} | {gcs:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
