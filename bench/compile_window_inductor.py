"""The compile window with PyTorch's default backend (inductor): memguard's collection time per
compile, window on versus off.

usage: python3 bench/compile_window_inductor.py --lib build/lib/libmemguard.so [--reps 3] [--compiles 6]
       [--device cpu|cuda] [--json OUT]

Workload: --compiles distinct small functions, each compiled with torch.compile (inductor) and
called once, so each is one compile and one memguard collection. Arms (fresh processes,
alternated, --reps each): `window` (default settings) and `full` (MEMGUARD_COMPILE_WINDOW=0).
Measured: each memguard collection's duration and object count from the report's `Y ... memguard`
records; the first compile of a process is listed apart (it imports inductor, codegen and
the compiler stack, whose new objects the first window's collection must scan).
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r'''
import sys, torch
device, n = sys.argv[1], int(sys.argv[2])
x = torch.randn(64, 64, device=device)
for k in range(n):
    ns = {"torch": torch}
    exec(f"def f(x):\n    return torch.sin(x) * {k + 1} + x.relu()\n", ns)
    torch.compile(ns["f"])(x)
'''


def run_arm(lib, arm, device, compiles, tmp):
    env = dict(os.environ)
    env.update({"LD_PRELOAD": lib, "MEMGUARD_OUTPUT": os.path.join(tmp, f"{arm}.%p.mgr"), "OMP_NUM_THREADS": "1",
                "MEMGUARD_REPORT_ENCODING": "text"})  # its Y records are read below as lines
    env.pop("MEMGUARD_COLLECT_COMPILE_GARBAGE", None)
    if arm == "full":
        env["MEMGUARD_COMPILE_WINDOW"] = "0"
    else:
        env.pop("MEMGUARD_COMPILE_WINDOW", None)
    before = set(glob.glob(os.path.join(tmp, f"{arm}.*.mgr")))
    subprocess.run([sys.executable, "-c", CHILD, device, str(compiles)], env=env, check=True)
    (path,) = set(glob.glob(os.path.join(tmp, f"{arm}.*.mgr"))) - before
    rows = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if p[0] == "Y" and p[3] == "memguard":
                rows.append((int(p[5]) / 1e6, int(p[6])))  # ms, objects collected
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--compiles", type=int, default=6)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json")
    a = ap.parse_args()
    lib = os.path.abspath(a.lib)
    results = {"window": [], "full": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.reps):
            for arm in ("window", "full"):
                rows = run_arm(lib, arm, a.device, a.compiles, tmp)
                if len(rows) != a.compiles:
                    sys.exit(f"{arm}: expected {a.compiles} memguard collections, the report has {len(rows)}")
                results[arm].append(rows)
    print(f"| arm | first compile: collection ms, mean ± sd | later compiles: ms per collection, mean ± sd | "
          f"objects collected (later) |\n|---|---|---|---|")
    summary = {}
    for arm, runs in results.items():
        first = [r[0][0] for r in runs]
        later = [ms for r in runs for ms, _ in r[1:]]
        objs = [o for r in runs for _, o in r[1:]]
        sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0  # noqa: E731
        summary[arm] = {"first_ms": statistics.mean(first), "later_ms": statistics.mean(later)}
        print(f"| {arm} | {statistics.mean(first):.1f} ± {sd(first):.1f} | {statistics.mean(later):.2f} ± {sd(later):.2f} | "
              f"{statistics.median(objs):.0f} |")
    print(f"\nwindow / full, later compiles: {summary['window']['later_ms'] / summary['full']['later_ms']:.4f}; "
          f"first compile: {summary['window']['first_ms'] / summary['full']['first_ms']:.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "summary": summary}, f)


if __name__ == "__main__":
    main()
