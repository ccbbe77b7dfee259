"""Expandable segments: memguard's allocator against PyTorch's, both with
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, on a fragmenting workload, on a GPU.

usage: python3 bench/expandable_segments.py --lib build/lib/libmemguard.so [--runs 3] [--steps 60]
                                            [--out DIR] [--json OUT.json]
       python3 bench/expandable_segments.py --child RESULT.json [--steps 60]   (one arm, in this process)

Arms, each in a fresh process, interleaved (ABBA order over the runs, so that drift of the machine
hits both arms alike):
  native    no LD_PRELOAD: PyTorch's allocator with expandable segments
  memguard  LD_PRELOAD=--lib, MEMGUARD_ALLOCATOR=memguard, the same PYTORCH_CUDA_ALLOC_CONF
and once, for context only, `cudamalloc`: PyTorch's allocator without expandable segments.

The workload is what expandable segments are for: a model whose batch grows a little every step
(so every activation is slightly larger than any cached block), with activations of 24 layers
alive at once, freed in reverse as a backward pass does, plus small tensors in between. Every size
comes from a seeded generator: both arms make the same requests. Each arm reports the peak reserved
bytes (torch.cuda.max_memory_reserved), the peak allocated bytes, PyTorch's counters
(num_device_alloc/free, segments), and a checksum of the values computed (float.hex, so the arms
must agree bitwise). The memguard arm's report (MEMGUARD_OUTPUT under --out) is read for the
driver calls: every tensor block (T) inside a reserved range (V), none inside a cudaMalloc'ed
segment (A), and V/N/Q records (the driver's virtual memory calls) present.

Target (issue 22): the median of memguard's peak reserved within 1.02x of the native arm's.
Exit status 0 when the target is met and the checksums agree.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MIB = 1 << 20
EXPANDABLE = "expandable_segments:True"


# --- the workload (child) --------------------------------------------------------------------------

def workload(steps):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    hidden, layers = 1024, 24
    weights = [torch.randn(hidden, hidden, device=dev) / 32 for _ in range(layers)]
    sizes = random.Random(1)
    gen = torch.Generator(device=dev)
    gen.manual_seed(2)
    checksum = 0.0
    for step in range(steps):
        # The batch grows by a few rows per step, with jitter: each activation (batch x 1024 x 4
        # bytes, 4 to 20 MiB) is a little larger than the cached blocks of the previous steps.
        batch = 1024 + 64 * step + 8 * sizes.randrange(0, 16)
        x = torch.randn(batch, hidden, device=dev, generator=gen)
        saved, small = [], []
        for w in weights:
            x = torch.tanh(x @ w)
            saved.append(x)
            small.append(torch.empty(sizes.randrange(1, 64) * 1024, device=dev, dtype=torch.uint8))
        total = x.sum()
        # Backward-like: the activations go in reverse, each replaced by a gradient-sized temporary.
        while saved:
            a = saved.pop()
            g = a * (1 - a * a)
            total = total + g.mean()
            del a, g
        checksum += float(total)
        del x, small, total
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    keep = ("num_device_alloc", "num_device_free", "segment.all.peak", "num_alloc_retries", "num_ooms")
    return {
        "backend": torch.cuda.memory.get_allocator_backend(),  # "pluggable" when memguard's is installed
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "peak_reserved": torch.cuda.max_memory_reserved(),
        "peak_allocated": torch.cuda.max_memory_allocated(),
        "checksum": checksum.hex(),
        "stats": {k: stats.get(k) for k in keep},
    }


# --- the driver ----------------------------------------------------------------------------------

def report_calls(path):
    """What the report says about how tensor memory was obtained: counts of the driver's virtual
    memory records, cudaMalloc/cuMemAlloc segments (A records), and the tensor blocks (T) that lie
    inside a reserved range (V) or inside such a segment."""
    counts = {"V": 0, "N": 0, "Q": 0, "q": 0, "n": 0, "v": 0, "A_malloc": 0, "T": 0, "T_in_V": 0, "T_in_A": 0}
    ranges, segments, blocks = [], [], []
    with open(path, errors="replace") as f:
        for line in f:
            r = line.split()
            if not r or len(r[0]) != 1:
                continue
            if r[0] in counts:
                counts[r[0]] += 1
            if r[0] == "V" and len(r) > 4:
                ranges.append((int(r[3], 16), int(r[4])))
            elif r[0] == "A" and len(r) > 6 and r[6] in ("cudaMalloc", "cuMemAlloc"):
                counts["A_malloc"] += 1
                segments.append((int(r[3], 16), int(r[4])))
            elif r[0] == "T" and len(r) > 4:
                blocks.append(int(r[3], 16))
    counts["T"] = len(blocks)
    inside = lambda a, spans: any(base <= a < base + size for base, size in spans)  # noqa: E731
    counts["T_in_V"] = sum(1 for a in blocks if inside(a, ranges))
    counts["T_in_A"] = sum(1 for a in blocks if inside(a, segments))
    return counts


def run_arm(arm, steps, lib, out_dir, index):
    result = Path(out_dir) / f"expandable_{arm}_{index}.json"
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:False" if arm == "cudamalloc" else EXPANDABLE
    if arm == "memguard":
        env["LD_PRELOAD"] = str(Path(lib).resolve())
        env["MEMGUARD_ALLOCATOR"] = "memguard"
        env["MEMGUARD_OUTPUT"] = str(Path(out_dir) / f"expandable_memguard_{index}.%p.mgr")
        env["MEMGUARD_REPORT_ENCODING"] = "text"  # the report is read below as lines
    cmd = [sys.executable, os.path.abspath(__file__), "--child", str(result), "--steps", str(steps)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=580)
    if p.returncode != 0:
        raise RuntimeError(f"{arm} run {index} exited {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    data = json.loads(result.read_text())
    data["arm"] = arm
    data["stderr"] = p.stderr
    if arm == "memguard":
        reports = sorted(Path(out_dir).glob(f"expandable_memguard_{index}.*.mgr"))
        data["report"] = str(reports[-1]) if reports else None
        data["calls"] = report_calls(reports[-1]) if reports else None
    return data


def compare(runs_by_arm):
    """The figures the target is judged on, and what went wrong (empty when nothing)."""
    problems = []
    nat = runs_by_arm["native"]
    mg = runs_by_arm["memguard"]
    for d in mg:
        if d["backend"] != "pluggable":
            problems.append(f"memguard run: PyTorch's allocator backend is {d['backend']}: memguard did not install")
    med_nat = statistics.median(d["peak_reserved"] for d in nat)
    med_mg = statistics.median(d["peak_reserved"] for d in mg)
    ratio = med_mg / med_nat
    if ratio > 1.02:
        problems.append(f"peak reserved ratio {ratio:.4f} > 1.02")
    sums = {d["checksum"] for d in nat + mg}
    if len(sums) != 1:
        problems.append(f"checksums differ between runs: {sorted(sums)}")
    for d in mg:
        c = d.get("calls") or {}
        if c.get("T", 0) == 0 or c.get("T_in_A", 1) != 0 or c.get("T_in_V") != c.get("T"):
            problems.append(f"memguard run: tensor blocks not all in expandable segments (or some in "
                            f"cudaMalloc'ed ones): {c}")
        if not (c.get("V", 0) > 0 and c.get("N", 0) > 0 and c.get("Q", 0) > 0):
            problems.append(f"memguard run: no driver virtual memory calls in its report: {c}")
    return {"median_native": med_nat, "median_memguard": med_mg, "ratio": ratio}, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", help="run the workload in this process and write its JSON here")
    ap.add_argument("--lib", help="libmemguard.so")
    ap.add_argument("--runs", type=int, default=3, help="runs per arm (default 3)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out", help="directory for results and reports (default: a temporary one)")
    ap.add_argument("--json", help="write every run's figures here")
    args = ap.parse_args()
    if args.child:
        Path(args.child).write_text(json.dumps(workload(args.steps)))
        return 0
    if not args.lib:
        ap.error("--lib is required")
    out_dir = args.out or tempfile.mkdtemp(prefix="mg_expandable_")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    runs = {"native": [], "memguard": []}
    for i in range(args.runs):
        order = ("native", "memguard") if i % 2 == 0 else ("memguard", "native")
        for arm in order:
            d = run_arm(arm, args.steps, args.lib, out_dir, i)
            runs[arm].append(d)
            calls = f" report calls {d['calls']}" if arm == "memguard" else ""
            print(f"run {i} {arm:9s} peak reserved {d['peak_reserved'] / MIB:9.1f} MiB, peak allocated "
                  f"{d['peak_allocated'] / MIB:9.1f} MiB, {d['stats']}, checksum {d['checksum']}{calls}", flush=True)
    context = run_arm("cudamalloc", args.steps, args.lib, out_dir, 0)
    print(f"(context) PyTorch without expandable segments: peak reserved {context['peak_reserved'] / MIB:.1f} MiB, "
          f"peak allocated {context['peak_allocated'] / MIB:.1f} MiB", flush=True)
    figures, problems = compare(runs)
    print(f"{runs['native'][0]['device']}, torch {runs['native'][0]['torch']}, {args.steps} steps, {args.runs} runs "
          f"per arm: median peak reserved native {figures['median_native'] / MIB:.1f} MiB, memguard "
          f"{figures['median_memguard'] / MIB:.1f} MiB, ratio {figures['ratio']:.4f} (target <= 1.02)")
    if args.json:
        for arm_runs in runs.values():
            for d in arm_runs:
                d.pop("stderr", None)
        context.pop("stderr", None)
        Path(args.json).write_text(json.dumps({"runs": runs, "context": context, "figures": figures,
                                               "problems": problems}, indent=1))
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
