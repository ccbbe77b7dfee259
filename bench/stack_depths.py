"""What a text report's tensor allocations carry: per allocation (T), the frames of its native (S)
and Python (P) stacks, as a distribution; with --steps N also allocations per step.

usage: python3 bench/stack_depths.py REPORT [--steps N]   (a text report: MEMGUARD_REPORT_ENCODING=text
where the binary form is the default)
"""
import argparse
import collections
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--steps", type=int, default=0)
    a = ap.parse_args()
    native, python = {}, {}
    per_alloc_native, per_alloc_python = [], []
    threads = collections.Counter()
    with open(a.report, errors="replace") as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "S":
                native[parts[1]] = len(parts) - 2
            elif parts[0] == "P":
                python[parts[1]] = len(parts) - 2
            elif parts[0] == "T":
                # T t tid addr size requested device stream stack_id python_stack_id capture_id pool
                per_alloc_native.append(native.get(parts[8], 0))
                per_alloc_python.append(python.get(parts[9], 0))
                threads["python" if parts[9] != "0" else "no python"] += 1
    n = len(per_alloc_native)
    if not n:
        raise SystemExit(f"{a.report}: no T records")
    print(f"tensor allocations: {n}" + (f", {n / a.steps:.0f} per step" if a.steps else ""))
    print(f"distinct native stacks {len(native)}, Python stacks {len(python)}")
    for name, xs in (("native frames", per_alloc_native), ("python frames", per_alloc_python)):
        q = statistics.quantiles(xs, n=4)
        print(f"{name} per allocation: mean {statistics.mean(xs):.1f}, quartiles {q}, max {max(xs)}")
    print("allocations with/without a Python stack:", dict(threads))
    deep = [x for x, p in zip(per_alloc_native, per_alloc_python) if p == 0]
    if deep:
        print(f"native frames of allocations without a Python stack: mean {statistics.mean(deep):.1f}")


if __name__ == "__main__":
    main()
