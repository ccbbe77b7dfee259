"""memguard's GPU acceptance suite: every issue's checks on a real GPU, with a pass/fail table.

usage: python3 tools/gpu/acceptance.py --build BUILD_DIR --out OUT_DIR [--only SUBSTRING]

Run through tools/gpu/acceptance.sh, which builds memguard first. Each check prints what it saw;
the table at the end is the summary. Exit status 0 only when every selected check passed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKS = []


def check(issue, name):
    def register(fn):
        CHECKS.append((issue, name, fn))
        return fn
    return register


class Context:
    def __init__(self, build, out):
        self.build = Path(build).resolve()
        self.out = Path(out).resolve()
        self.lib = self.build / "lib" / "libmemguard.so"
        self.cli = self.build / "bin" / "memguard"
        self.python = sys.executable
        self._cache = {}

    def run(self, cmd, env=None, preload=False, timeout=600, check=True):
        full_env = dict(os.environ)
        full_env.update(env or {})
        if preload:
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


def train_run(ctx, tag, preload, extra_env=None):
    def go():
        result = ctx.out / f"train_{tag}.json"
        env = {"MEMGUARD_OUTPUT": str(ctx.out / f"train_{tag}.%p.mgr")}
        env.update(extra_env or {})
        p = ctx.run([ctx.python, str(HERE / "workloads" / "train_small.py"), str(result)], env=env, preload=preload)
        data = json.loads(result.read_text())
        data["seconds"] = p.seconds
        data["stderr"] = p.stderr
        return data
    return ctx.once(("train", tag), go)


# ---------------------------------------------------------------------------------- issue 2: core
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                  "ld-linux-x86-64.so.2", "libstdc++.so.6", "libgcc_s.so.1"}


@check(2, "libmemguard.so has no NEEDED beyond glibc, libstdc++, libgcc_s")
def self_contained(ctx):
    out = ctx.run(["readelf", "-d", str(ctx.lib)]).stdout
    needed = set(re.findall(r"Shared library: \[(.+?)\]", out))
    print("NEEDED:", sorted(needed))
    assert needed <= ALLOWED_NEEDED, needed - ALLOWED_NEEDED


@check(2, "training loop: every cudaMalloc/cudaFree recorded (= num_device_alloc/free)")
def alloc_counts(ctx):
    data = train_run(ctx, "preload", preload=True)
    files = reports(ctx, "train_preload.")
    assert len(files) == 1, files
    allocs, frees, info = parse_report(files[0])
    n_malloc = sum(1 for a in allocs if a[6] == "cudaMalloc")
    n_free = sum(1 for f in frees if f[5] == "cudaFree")
    stats = data["stats"]
    print(f"torch {data['torch']}: num_device_alloc={stats['num_device_alloc']} num_device_free={stats['num_device_free']}")
    print(f"report {files[0].name}: cudaMalloc={n_malloc} cudaFree={n_free} (all A={len(allocs)}, all F={len(frees)})")
    assert stats["num_device_alloc"] > 0 and stats["num_device_free"] > 0
    assert n_malloc == stats["num_device_alloc"], (n_malloc, stats["num_device_alloc"])
    assert n_free == stats["num_device_free"], (n_free, stats["num_device_free"])


@check(2, "training loop: losses bitwise identical with and without the library")
def bitwise_losses(ctx):
    with_lib = train_run(ctx, "preload", preload=True)
    without = train_run(ctx, "plain", preload=False)
    print("with memguard:   ", with_lib["losses"])
    print("without memguard:", without["losses"])
    print(f"wall time: {with_lib['seconds']:.1f} s with, {without['seconds']:.1f} s without")
    assert with_lib["losses"] == without["losses"]


@check(2, "memguard summary/top read the report; top names the Python-facing PyTorch path")
def top_names_torch(ctx):
    train_run(ctx, "preload", preload=True)
    report = reports(ctx, "train_preload.")[0]
    summary = ctx.run([str(ctx.cli), "summary", str(report)])
    print(summary.stdout)
    sj = json.loads(ctx.run([str(ctx.cli), "summary", "--json", str(report)]).stdout)
    for key in ("allocations", "frees", "peak_bytes", "live_bytes_at_exit", "oom_events"):
        assert isinstance(sj[key], int), key
    top = ctx.run([str(ctx.cli), "top", str(report), "-n", "5", "--frames", "12"])
    print(top.stdout)
    tj = json.loads(ctx.run([str(ctx.cli), "top", "--json", str(report)]).stdout)
    python_facing = []
    for site in tj["sites"]:
        for fr in site["frames"]:
            if "libtorch_python" in (fr.get("module") or "") and fr.get("function"):
                python_facing.append(fr["function"])
                break
    print("Python-facing frames of the top sites:", python_facing[:5])
    assert python_facing, "no site has a symbolized libtorch_python.so frame"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    ctx = Context(args.build, args.out)
    ctx.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for issue, name, fn in CHECKS:
        if args.only and args.only not in name and args.only != str(issue):
            continue
        print(f"\n=== issue {issue}: {name}", flush=True)
        t0 = time.time()
        try:
            fn(ctx)
            status = "PASS"
        except Exception as e:  # noqa: BLE001 - every failure is reported in the table
            traceback.print_exc()
            status = "FAIL"
            print("->", str(e)[:2000])
        rows.append((issue, name, status, time.time() - t0))
        sys.stdout.flush()
    print("\n| issue | check | result | seconds |\n|---|---|---|---|")
    for issue, name, status, secs in rows:
        print(f"| {issue} | {name} | {status} | {secs:.1f} |")
    failed = sum(1 for r in rows if r[2] != "PASS")
    print(f"\n{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
