"""Step time with memguard's steps and OOM explanation on, against off and against no memguard
(issue 20's benchmark; results in docs/benchmarks.md).

usage: python3 bench/gpu/step_insight.py --memguard MEMGUARD_CLI [--reps 5] [--json OUT.json]

Arms, each a fresh process, interleaved within every repetition (the order rotates from one
repetition to the next), all in one run:
  none   no memguard
  off    memguard run --no-steps --no-explain-oom (interposition, stacks, the Python hook)
  on     memguard run (as shipped: optimizer step hooks, a step moment per step within the 1% budget,
         the OOM observer attached)
Workloads (each step: forward, backward, AdamW step, zero_grad; times taken with perf_counter_ns
after torch.cuda.synchronize, the median over the timed steps of one process):
  gpt    a GPT-style model (d_model 1024, 8 layers, batch 16 x 256 tokens): GPU-bound
  small  a 4-layer MLP of width 256, batch 32: CPU-bound, where a step moment's cost shows most
Per arm: mean and standard deviation of the per-process medians; the paired ratio of each process to
the `none` (and `off`) process of the same repetition, mean +- standard deviation.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

WORKLOADS = {"gpt": (15, 60), "small": (30, 400)}  # warm-up steps, timed steps
ARMS = ("none", "off", "on")


def worker(name, out):
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    if name == "gpt":
        layer = nn.TransformerEncoderLayer(1024, 16, 4096, dropout=0.0, batch_first=True, norm_first=True)
        model = nn.Sequential(nn.Embedding(2048, 1024), nn.TransformerEncoder(layer, 8), nn.Linear(1024, 2048)).cuda()
        x = torch.randint(0, 2048, (16, 256), device="cuda")

        def loss_fn():
            return model(x).float().square().mean()
    else:
        model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(256, 256), nn.GELU())]).cuda()
        x = torch.randn(32, 256, device="cuda")

        def loss_fn():
            return model(x).square().mean()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    warm, timed = WORKLOADS[name]
    times = []
    for i in range(warm + timed):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        loss = loss_fn()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= warm:
            times.append(time.perf_counter_ns() - t0)
    with open(out, "w") as f:
        json.dump({"median_ns": statistics.median(times)}, f)


def run_arm(arm, name, memguard, tmp):
    out = os.path.join(tmp, f"{name}_{arm}_{time.monotonic_ns()}.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, out]
    env = dict(os.environ, MEMGUARD_OUTPUT=os.path.join(tmp, "r.%p.mgr"))
    if arm == "off":
        cmd = [memguard, "run", "--no-steps", "--no-explain-oom", "--", *cmd]
    elif arm == "on":
        cmd = [memguard, "run", "--", *cmd]
    subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    with open(out) as f:
        return json.load(f)["median_ns"]


def mean_sd(xs):
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(sys.argv[2], sys.argv[3])
    ap = argparse.ArgumentParser()
    ap.add_argument("--memguard", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--workloads", default="gpt,small")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.workloads.split(","):
            per = {a: [] for a in ARMS}
            for rep in range(args.reps):
                order = ARMS[rep % 3:] + ARMS[:rep % 3]
                for arm in order:
                    per[arm].append(run_arm(arm, name, args.memguard, tmp))
            results[name] = per
            print(f"{name}: step time per process (median of {WORKLOADS[name][1]} steps), {args.reps} repetitions")
            for arm in ARMS:
                m, sd = mean_sd([v / 1e6 for v in per[arm]])
                line = f"  {arm:5s} {m:8.3f} ms +- {sd:.3f}"
                if arm != "none":
                    r, rsd = mean_sd([a / b for a, b in zip(per[arm], per["none"])])
                    line += f"   / none {r:.3f} +- {rsd:.3f}"
                if arm == "on":
                    r, rsd = mean_sd([a / b for a, b in zip(per["on"], per["off"])])
                    line += f"   / off {r:.3f} +- {rsd:.3f}"
                print(line, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
