"""memguard's GPU acceptance suite: checks of every feature on a real GPU, with a pass/fail table.

usage: python3 tests/gpu/acceptance.py --list
       python3 tests/gpu/acceptance.py --build BUILD_DIR|--venv VENV --out OUT_DIR [--part PART[,PART...]]
                                       [--only SUBSTRING] [--skip SUBSTRING]... (repeatable)

Run through tests/gpu/acceptance.sh, which builds memguard first. The checks live in checks/, one
file per part (a feature); --part runs some parts, --only the checks whose name contains a string,
--skip leaves out those whose name contains one. --list prints the parts, their checks and how to
split them into device calls of 10 minutes, without running anything (it loads every check file).
Each check prints what it saw; the table at the end is the summary. Exit status 0 only when every
selected check passed.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKS = []

# The parts, in the order they run: each is the file checks/<name, with _ for ->.py. The seconds
# are what the part's checks took on one H200 (torch 2.11, 2026-12-03: 22, 45, 249, 132, 30, 21, 21,
# 125, 6 and 49 s), rounded up with a margin: they plan the device calls.
PARTS = [
    ("interposition", 30, "self-contained library; every cudaMalloc/cudaFree of a training loop recorded, "
                          "losses unchanged; summary and top name the PyTorch path"),
    ("graphs", 60, "CUDA graphs: results unchanged, private pools owned by their captures, warm-up retention"),
    ("compile-garbage", 260, "compile garbage freed on CUDA, `memguard cycles` bytes; step-time benchmark"),
    ("python-hook", 150, "the Python hook's CPU test drivers under this machine's CPython and torch"),
    ("driver-entry-points", 50, "expandable segments, cudaMallocAsync, static cudart, NCCL and cuBLAS, cuMem IPC"),
    ("phases", 30, "phases against PyTorch's counters; NVTX ranges as phases"),
    ("export-merge", 30, "memory_viz export read by PyTorch; DDP under torchrun and `memguard merge` (2 GPUs)"),
    ("allocator-mode", 190, "allocator mode: training, graphs, compile, statistics, OOM rescue, by hand, "
                        "snapshots and memory history"),
    ("allocator-mode-reports", 15, "the CLI on allocator-mode reports: top, cycles, native cut, exports"),
    # an estimate (not yet run on the H200): seven processes of about 10 s
    ("allocator-mode-expandable", 90, "allocator mode with expandable segments: the driver's calls, values, "
                                      "peak reserved against PyTorch's"),
    ("compile-window", 80, "benchmark: the compile window with inductor on CUDA (its own limit: 580 s)"),
    ("launch", 90, "memguard run, pytest --memguard and the gates (the installed wheel's with --wheel)"),
    ("insight-library", 60, "steps from optimizer hooks, tag bytes against real tensors, OOM context (native, allocator mode)"),
    ("insight", 150, "steps, categories and OOMs explained, end to end through the CLI, both modes"),
    # an estimate (not yet run on the H200): the explain run ~40 s, three recompute arms ~60 s, two
    # periodic arms ~30 s, the budget run ~35 s, the benchmark's 4 cold compile sequences ~120 s
    ("cycles", 330, "issue 21: what held it (--explain), the recompute and step triggers, the budget; "
                    "benchmark against the seed's collections"),
    # estimates (not yet run: no two-GPU machine yet; issue 24). multi-gpu: 8 torchrun jobs of 2 ranks,
    # 4 eager ~20 s each, 4 compiled with a cold inductor cache ~50 s each; multi-gpu-ranks: 5 jobs,
    # ~25 s each. They skip with fewer than 2 GPUs; run them on nvidia-h200-x2.
    ("multi-gpu", 320, "2 GPUs: DDP and FSDP2, eager and compiled, under `memguard run -- torchrun`: losses "
                       "bitwise equal, step-time ratio; merge rows, NCCL and categories per rank"),
    ("multi-gpu-ranks", 150, "2 GPUs: a heavier rank named by merge's outliers, an OOM on one rank, "
                             "allocator mode under FSDP2"),
]
# Parts are packed in order into one device call while their checks take at most this many seconds:
# a call is limited to 600 s, and the rest is left to the build and to estimates that fall short.
CALL_BUDGET_S = 360


class Skip(Exception):
    """Raised by a check that cannot run on this machine (say, it needs two GPUs): SKIP in the table."""


def check(part, name):
    def register(fn):
        CHECKS.append((part, name, fn))
        return fn
    return register


class Context:
    """Where memguard is: a build tree (--build), or a venv with the wheel installed (--venv), where
    the library and the CLI are the installed ones and every preloaded run goes through `memguard
    run --` instead of setting LD_PRELOAD."""

    def __init__(self, out, build=None, venv=None):
        self.out = Path(out).resolve()
        self.venv = Path(venv).resolve() if venv else None
        if self.venv:
            self.python = str(self.venv / "bin" / "python")
            self.cli = self.venv / "bin" / "memguard"
            self.lib = Path(subprocess.run([self.python, "-c", "import memguard; print(memguard.lib_path())"],
                                           capture_output=True, text=True, check=True).stdout.strip())
        else:
            self.build = Path(build).resolve()
            self.python = sys.executable
            self.lib = self.build / "lib" / "libmemguard.so"
            self.cli = self.build / "bin" / "memguard"
        self._cache = {}

    def run(self, cmd, env=None, preload=False, timeout=600, check=True):
        full_env = dict(os.environ)
        full_env.update(env or {})
        # The checks read the reports' lines themselves (parse_report, records): text, unless a
        # check asks for binary.
        full_env.setdefault("MEMGUARD_REPORT_ENCODING", "text")
        if preload and self.venv:
            cmd = [str(self.cli), "run", "--", *cmd]
        elif preload:
            full_env["LD_PRELOAD"] = str(self.lib)
        t0 = time.time()
        p = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"{cmd[:3]}... exited {p.returncode}\nstdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-4000:]}")
        p.seconds = time.time() - t0
        return p

    def once(self, key, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]


def parse_report(path):
    """A minimal reader of the report format (docs/report-format.md), independent of the CLI."""
    allocs, frees, info = [], [], {}
    with open(path) as f:
        header = f.readline().split()
        assert header == ["MEMGUARD-REPORT", "1"], header
        for line in f:
            fields = line.split()
            if fields[0] == "A":
                allocs.append(fields)
            elif fields[0] == "F":
                frees.append(fields)
            elif fields[0] == "I":
                info[fields[1]] = fields[2]
    return allocs, frees, info


def reports(ctx, prefix):
    return sorted(ctx.out.glob(prefix + "*.mgr"))


def workload(ctx, script, tag, preload, env=None, args=()):
    """Runs tests/gpu/workloads/<script>.py once per (script, tag) with its report named
    <script>_<tag>.<pid>.mgr; returns its JSON result plus the wall time and stderr."""
    def go():
        result = ctx.out / f"{script}_{tag}.json"
        full_env = {"MEMGUARD_OUTPUT": str(ctx.out / f"{script}_{tag}.%p.mgr")}
        full_env.update(env or {})
        p = ctx.run([ctx.python, str(HERE / "workloads" / f"{script}.py"), str(result), *args], env=full_env,
                    preload=preload)
        data = json.loads(result.read_text())
        data["seconds"] = p.seconds
        data["stderr"] = p.stderr
        return data
    return ctx.once((script, tag), go)


def train_run(ctx, tag, preload):
    return workload(ctx, "train_small", tag, preload)


def records(path, kinds):
    """Raw records of the given types (list of field lists), in file order."""
    out = []
    with open(path) as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] in kinds:
                out.append(fields)
    return out


def cli_print(ctx, *args):
    p = ctx.run([str(ctx.cli), *args], check=False)
    print(f"$ memguard {' '.join(args[:1])} ... (exit {p.returncode})")
    print(p.stdout[-6000:] or p.stderr[-2000:])
    return p


# Each part's checks live in checks/<part>.py, run in this module's namespace (so they use check,
# workload, Context, Skip, ... directly), in the order of PARTS. A file that is not a part, a part
# without a file, or a check registered under another part's name stops the suite: nothing is
# dropped without a word.
def _load_parts():
    files = {p.stem for p in (HERE / "checks").glob("*.py")}
    modules = [name.replace("-", "_") for name, _, _ in PARTS]
    if files != set(modules):
        sys.exit(f"acceptance: checks/ holds {sorted(files)}, PARTS names {sorted(modules)}")
    for (name, _, _), module in zip(PARTS, modules):
        path = HERE / "checks" / f"{module}.py"
        first = len(CHECKS)
        exec(compile(path.read_text(), str(path), "exec"), globals())
        added = CHECKS[first:]
        if not added or any(part != name for part, _, _ in added):
            sys.exit(f"acceptance: {path} must register its checks as part '{name}', "
                     f"not {sorted({part for part, _, _ in added})}")


_load_parts()


def device_calls():
    """The parts packed in order into device calls of at most CALL_BUDGET_S seconds of checks."""
    calls, current, seconds = [], [], 0
    for name, secs, _ in PARTS:
        if current and seconds + secs > CALL_BUDGET_S:
            calls.append((current, seconds))
            current, seconds = [], 0
        current.append(name)
        seconds += secs
    calls.append((current, seconds))
    return calls


def print_parts():
    print("| part | checks | ~seconds | what |\n|---|---|---|---|")
    for name, secs, what in PARTS:
        print(f"| {name} | {sum(1 for c in CHECKS if c[0] == name)} | {secs} | {what} |")
    for name, _, _ in PARTS:
        print(f"\n{name}:")
        for part, check_name, _ in CHECKS:
            if part == name:
                print(f"  - {check_name}")
    print(f"\n{len(CHECKS)} checks in {len(PARTS)} parts. One device call each (10 minutes, the build included):")
    for parts, secs in device_calls():
        print(f"  tests/gpu/acceptance.sh --part {','.join(parts)}    (~{secs} s of checks)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", action="store_true", help="print the parts and their checks, run nothing")
    ap.add_argument("--build", help="a build tree of memguard (build/lib/libmemguard.so, build/bin/memguard)")
    ap.add_argument("--venv", help="a venv with the wheel installed: runs go through its `memguard run`")
    ap.add_argument("--out")
    ap.add_argument("--part", default="", help="run only these parts (comma-separated; --list names them)")
    ap.add_argument("--only", default="", help="run only the checks whose name contains this")
    ap.add_argument("--skip", action="append", default=[],
                    help="skip checks whose name contains this (repeatable: e.g. the checks a cut-short run passed)")
    args = ap.parse_args()
    if args.list:
        print_parts()
        return 0
    if not (args.build or args.venv) or not args.out:
        ap.error("--build or --venv, and --out, are needed (or --list)")
    parts = [p for p in args.part.split(",") if p]
    unknown = [p for p in parts if p not in {name for name, _, _ in PARTS}]
    if unknown:
        ap.error(f"no part {', '.join(unknown)}; the parts: {', '.join(name for name, _, _ in PARTS)}")
    ctx = Context(args.out, build=args.build, venv=args.venv)
    ctx.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for part, name, fn in CHECKS:
        if parts and part not in parts:
            continue
        if args.only and args.only not in name:
            continue
        if any(sub in name for sub in args.skip):
            continue
        print(f"\n=== {part}: {name}", flush=True)
        t0 = time.time()
        try:
            fn(ctx)
            status = "PASS"
        except Skip as e:
            status = "SKIP"
            print("-> skipped:", e)
        except Exception as e:  # noqa: BLE001 - every failure is reported in the table
            traceback.print_exc()
            status = "FAIL"
            print("->", str(e)[:2000])
        rows.append((part, name, status, time.time() - t0))
        sys.stdout.flush()
    if not rows:
        print("acceptance: no check selected (--list names the parts and checks)", file=sys.stderr)
        return 2
    print("\n| part | check | result | seconds |\n|---|---|---|---|")
    for part, name, status, secs in rows:
        print(f"| {part} | {name} | {status} | {secs:.1f} |")
    failed = sum(1 for r in rows if r[2] == "FAIL")
    skipped = sum(1 for r in rows if r[2] == "SKIP")
    print(f"\n{len(rows) - failed - skipped} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
