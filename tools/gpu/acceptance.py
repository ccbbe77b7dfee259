"""memguard's GPU acceptance suite: every issue's checks on a real GPU, with a pass/fail table.

usage: python3 tools/gpu/acceptance.py --build BUILD_DIR --out OUT_DIR [--only ISSUE[,ISSUE...]|SUBSTRING] [--skip SUBSTRING]... (repeatable)

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


class Skip(Exception):
    """Raised by a check that cannot run on this machine (say, it needs two GPUs): SKIP in the table."""


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


def workload(ctx, script, tag, preload, env=None, args=()):
    """Runs tools/gpu/workloads/<script>.py once per (script, tag) with its report named
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
    files = reports(ctx, "train_small_preload.")
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
    report = reports(ctx, "train_small_preload.")[0]
    summary = ctx.run([str(ctx.cli), "summary", str(report)])
    print(summary.stdout)
    sj = json.loads(ctx.run([str(ctx.cli), "summary", "--json", str(report)]).stdout)
    for key in ("allocations", "frees", "peak_bytes", "live_bytes_at_exit", "oom_events"):
        assert isinstance(sj[key], int), key
    top = ctx.run([str(ctx.cli), "top", str(report), "-n", "5", "--frames", "12"])
    print(top.stdout)
    tj = json.loads(ctx.run([str(ctx.cli), "top", "--json", "--frames", "64", str(report)]).stdout)
    python_paths = []
    for site in tj["sites"]:
        frames = [fr for fr in site["frames"] if fr.get("kind") == "python"]
        torch_frames = [f"{fr.get('function')} ({fr.get('file')}:{fr.get('line')})" for fr in frames
                        if "/torch/" in (fr.get("file") or "")]
        if torch_frames:
            python_paths.append((site["bytes"], torch_frames[0], frames[-1].get("file")))
    print("top sites' innermost PyTorch Python frame:")
    for bytes_, frame, outer in python_paths[:5]:
        print(f"  {bytes_ / (1 << 20):8.2f} MiB  {frame}  (called from {outer})")
    assert python_paths, "no top site names a PyTorch Python frame"


# ------------------------------------------------------------------ issue 3: capture-pool ownership
def records(path, kinds):
    """Raw records of the given types (list of field lists), in file order."""
    out = []
    with open(path) as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] in kinds:
                out.append(fields)
    return out


def graphs_run(ctx, tag, preload):
    return workload(ctx, "graphs", tag, preload)


def graphs_report(ctx):
    files = reports(ctx, "graphs_preload.")
    # torch.compile's workers are separate processes that allocate nothing: one report.
    assert len(files) == 1, files
    return files[0]


def cli_print(ctx, *args):
    p = ctx.run([str(ctx.cli), *args], check=False)
    print(f"$ memguard {' '.join(args[:1])} ... (exit {p.returncode})")
    print(p.stdout[-6000:] or p.stderr[-2000:])
    return p


@check(3, "torch.cuda.graph, make_graphed_callables, reduce-overhead: results identical with and without")
def graphs_identical(ctx):
    with_lib = graphs_run(ctx, "preload", preload=True)
    without = graphs_run(ctx, "plain", preload=False)
    for key in ("graph_sums", "graphed_callables_sums", "reduce_overhead_sums"):
        print(key, "with:", with_lib[key][:3], "...")
        assert with_lib[key] == without[key], (key, with_lib[key], without[key])


@check(3, "private-pool segments attributed to their captures and graphs; graph destruction recorded")
def graphs_attribution(ctx):
    graphs_run(ctx, "preload", preload=True)
    path = graphs_report(ctx)
    begins = {r[3]: r for r in records(path, {"C"})}
    ends = {r[3]: r for r in records(path, {"c"})}
    owned = {}
    for a in records(path, {"A"}):
        cap = a[10] if len(a) > 10 else "0"
        if cap != "0":
            owned.setdefault(cap, []).append(a)
    graph_of = {r[3]: r[5] for r in ends.values() if r[5] != "-"}
    execs = records(path, {"G"})
    launches = records(path, {"L"})
    destroyed_execs = {r[3] for r in records(path, {"D"})}
    destroyed_graphs = {r[3] for r in records(path, {"K"})}
    print(f"captures: {len(begins)} begun, {len(ends)} ended; owned segments per capture: "
          f"{ {c: (len(v), sum(int(a[4]) for a in v)) for c, v in owned.items()} }")
    print(f"graph execs instantiated: {len(execs)}, launches: {len(launches)}, execs destroyed: "
          f"{len(destroyed_execs)}, graphs destroyed: {len(destroyed_graphs)}")
    assert len(begins) >= 3, "expected captures from torch.cuda.graph, make_graphed_callables and reduce-overhead"
    assert owned, "no block was attributed to a capture"
    for cap, blocks in owned.items():
        assert cap in ends and graph_of.get(cap), f"capture {cap} owns blocks but ended without a graph"
        assert all(a[6] == "cudaMalloc" for a in blocks), "private-pool segments come from cudaMalloc"
    first = sorted(owned, key=int)[0]
    g = graph_of[first]
    first_execs = [e[3] for e in execs if e[4] == g]
    assert first_execs, "the first capture's graph was never instantiated"
    replays = sum(1 for l in launches if l[3] in first_execs)
    print(f"first capture {first}: graph {g}, execs {first_execs}, replays {replays}")
    assert replays >= 5, replays
    assert g in destroyed_graphs and all(e in destroyed_execs for e in first_execs), "graph destruction not recorded"
    unsafe = [w for w in records(path, {"W"}) if w[3] == "unsafe_call"]
    assert not unsafe, f"PyTorch made no unsafe call, but memguard reported {unsafe[:3]}"
    if (ctx.cli).exists():
        cli_print(ctx, "graphs", str(path))


@check(3, "a deliberately retained warm-up output shows in the warm-up retention view")
def warmup_retention(ctx):
    data = graphs_run(ctx, "preload", preload=True)
    path = graphs_report(ctx)
    first_capture = min(int(r[3]) for r in records(path, {"C"}))
    retained = [w for w in records(path, {"W"})
                if w[3] == "warmup_retention" and int(w[4]) == first_capture and w[5] == "begin"]
    sizes = sorted((int(w[9]) for w in retained), reverse=True)
    print(f"warm-up retention at the begin of capture {first_capture}: sites {len(retained)}, bytes {sizes[:5]}")
    assert sizes and sizes[0] >= 256 << 20, "the 256 MiB retained warm-up output is not in the view"
    if (ctx.cli).exists():
        cli_print(ctx, "hazards", str(path))


# ------------------------------------------------------------------ issue 4: compile garbage
def garbage_run(ctx, tag, preload, env):
    return workload(ctx, "compile_garbage", tag, preload, env,
                    ("--device", "cuda", "--layers", "4", "--hold-mib", "512"))


@check(4, "compile garbage on CUDA: lower cold incremental peak with the hook, bitwise-equal losses")
def compile_garbage_peak(ctx):
    on = garbage_run(ctx, "on", True, {})
    off = garbage_run(ctx, "off", True, {"MEMGUARD_COLLECT_COMPILE_GARBAGE": "0"})
    plain = garbage_run(ctx, "plain", False, {})
    held = on["call0_leaked"] * (512 << 20)
    gib = 1 << 30
    print(f"held by the compile cycles: {on['call0_leaked']} x 512 MiB = {held / gib:.2f} GiB")
    for name, d in (("hook on", on), ("hook off", off), ("no memguard", plain)):
        print(f"{name:12s}: cold incremental peak {d['call0_incremental_peak'] / gib:.3f} GiB, warm "
              f"{d['call1_incremental_peak'] / gib:.3f} GiB, alive at backward {d['call0_alive_at_backward']}, "
              f"loss {d['call0_loss']} / {d['call1_loss']}, {d['seconds']:.1f} s")
    for key in ("call0_loss", "call1_loss"):
        assert on[key] == off[key] == plain[key], key
    saved = off["call0_incremental_peak"] - on["call0_incremental_peak"]
    print(f"the hook lowered the cold incremental peak by {saved / gib:.3f} GiB "
          f"({saved / held:.2f} of the held bytes)")
    assert all(n == 0 for n in on["call0_alive_at_backward"]), on["call0_alive_at_backward"]
    assert saved >= 0.5 * held, (saved, held)


@check(4, "memguard cycles reports the CUDA bytes its collections freed")
def cycles_bytes(ctx):
    on = garbage_run(ctx, "on", True, {})
    files = reports(ctx, "compile_garbage_on.")
    assert len(files) == 1, files
    ys = [y for y in records(files[0], {"Y"}) if y[3] == "memguard"]
    freed = sum(int(y[8]) for y in ys if y[8] != "-")
    held = on["call0_leaked"] * (512 << 20)
    print(f"memguard collections: {len(ys)}, CUDA bytes freed {freed} (held {held}); compiles "
          f"{len(records(files[0], {'X'}))}")
    for y in ys:
        print("  ", " ".join(y))
    assert freed >= held, (freed, held)
    if (ctx.cli).exists():
        p = cli_print(ctx, "cycles", str(files[0]))
        if p.returncode == 0:
            j = json.loads(ctx.run([str(ctx.cli), "cycles", "--json", str(files[0])]).stdout)
            print("cycles --json totals:", j.get("totals"))
            assert j["totals"]["memguard"]["cuda_bytes_freed"] >= held


@check(4, "benchmark: warm compiled step time with the hook vs without (4 runs each, alternating)")
def step_time(ctx):
    import statistics
    arms = {"no memguard": [], "memguard": []}
    extra = {}
    for rep in range(4):
        for name, preload in (("no memguard", False), ("memguard", True)):
            result = ctx.out / f"step_{rep}_{preload}.json"
            env = {"MEMGUARD_OUTPUT": str(ctx.out / f"step_{rep}.%p.mgr")}
            ctx.run([ctx.python, str(HERE / "workloads" / "step_time.py"), str(result), "--steps", "40"], env=env,
                    preload=preload)
            data = json.loads(result.read_text())
            arms[name].append(statistics.median(data["step_ms"]))
            extra[name] = data
    for name, meds in arms.items():
        print(f"{name:12s}: median step {statistics.mean(meds):.3f} ms (runs: {', '.join(f'{m:.3f}' for m in meds)}); "
              f"{extra[name]['collections_per_step']:.2f} collections per step; torch.cuda.memory_allocated() "
              f"{extra[name]['memory_allocated_us']:.1f} us, raw counter {extra[name]['raw_counter_us']:.1f} us")
    ratio = statistics.mean(arms["memguard"]) / statistics.mean(arms["no memguard"])
    print(f"ratio memguard / no memguard: {ratio:.4f}")


# Each issue's later checks live in their own file, tools/gpu/checks_issue<N>.py, run in this
# module's namespace (so they use check, workload, Context, Skip, ... directly), in file order.
for _extra in sorted(HERE.glob("checks_issue*.py")):
    exec(compile(_extra.read_text(), str(_extra), "exec"), globals())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="run only these issues' checks (numbers: 7, or 2,3,4) or the checks whose "
                    "name contains this")
    ap.add_argument("--skip", action="append", default=[],
                    help="skip checks whose name contains this (repeatable: e.g. the checks a cut-short run passed)")
    args = ap.parse_args()
    ctx = Context(args.build, args.out)
    ctx.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for issue, name, fn in CHECKS:
        # --only N[,N...] (issue numbers) selects those issues' checks; anything else, checks whose
        # name contains it.
        issues_only = args.only.split(",") if re.fullmatch(r"\d+(,\d+)*", args.only) else None
        if args.only and (str(issue) not in issues_only if issues_only else args.only not in name):
            continue
        if any(sub in name for sub in args.skip):
            continue
        print(f"\n=== issue {issue}: {name}", flush=True)
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
        rows.append((issue, name, status, time.time() - t0))
        sys.stdout.flush()
    print("\n| issue | check | result | seconds |\n|---|---|---|---|")
    for issue, name, status, secs in rows:
        print(f"| {issue} | {name} | {status} | {secs:.1f} |")
    failed = sum(1 for r in rows if r[2] == "FAIL")
    skipped = sum(1 for r in rows if r[2] == "SKIP")
    print(f"\n{len(rows) - failed - skipped} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
