"""Allocator mode (MEMGUARD_ALLOCATOR=memguard) against PyTorch's own CUDA caching allocator, on a GPU.

usage: python3 bench/allocator_mode.py --lib build/lib/libmemguard.so [--quick] [--reps 3]
                                       [--bench together,latency,eager,eager_small,compiled]
                                       [--cpus 2,3,4,5]
                                       [--json OUT.json]
       python3 bench/allocator_mode.py --tables A.json [B.json ...]   (print tables from saved runs)

Every measurement runs in a fresh process; the arms alternate within each repetition (the order
rotates from one repetition to the next), all in one run. Arms:
  native        no LD_PRELOAD: PyTorch's allocator
  history       no LD_PRELOAD, torch.cuda.memory._record_memory_history(stacks="all") (PyTorch's own
                full tracking: native and Python stacks on every block)
  memguard      LD_PRELOAD, MEMGUARD_ALLOCATOR=memguard (full tracking: native and Python stacks
                and a report record on every block)
  mg_nostack    LD_PRELOAD, MEMGUARD_ALLOCATOR=memguard, MEMGUARD_STACK_DEPTH=0,
                MEMGUARD_PYTHON_STACKS=0 (the allocator with records but no stacks)
  mg_native, mg_python  (together only) memguard with native stacks only, with Python stacks only
  mgb           (small_together, with --lib-b: the second build with full tracking)
  mgb_nostack   (together, with --lib-b: a second build of the library, to compare a change side
                by side in one run; it takes the place of mg_native and mg_python) mg_nostack
                with that build
  floor         (latency only) no LD_PRELOAD; bench/pluggable_floor.cpp installed through
                CUDAPluggableAllocator: an exact-size free list and nothing else, so this is the
                cost of PyTorch's pluggable path itself, the floor for any pluggable allocator
Benchmarks:
  together  (the latency figures to quote) the latency benchmark with all seven arms running at
            once, each pinned to its own two cores (--cpus gives the 14), measuring the same size
            in the same 0.25 s wall-clock slices: on a shared machine the latency of one process
            drifts by up to 2x over minutes, and this way the drift hits every arm alike. The arms
            swap cores after each round of sizes, so each arm runs on every pair of cores, each
            the same number of rounds (--rounds; before 2026-11-30 evening 20 rounds over 7 pairs,
            so each arm had one pair a round less). Ratios are per slice, then the median.
            (torch.empty of a cached block does no GPU work, so the arms do not contend for the
            GPU.) --reps runs it that many times (slices pooled; the per-run table shows how
            much whole runs differ, which is what bounds an A/B of two builds).
  latency   torch.empty(n, uint8, device="cuda") then del, for n from 512 B to 256 MiB: median ns
            per allocation+free over --iters iterations (after a warm-up that fills the cache)
  eager, compiled  a GPT-style transformer training step (bf16 autocast, AdamW; d=1024, 12
            layers, seq 1024, batch 8), eager and torch.compile default mode: median step time and
            torch.cuda.max_memory_reserved(). On an H200 the eager step can be bound by the GPU,
            which hides the allocator's CPU cost.
  eager_small  the same step, eager, small enough (d=512, 6 layers, seq 128, batch 4) that the
            CPU (Python, dispatch, the allocator) bounds it: where an allocator's per-call cost
            shows most
  small_together  (the CPU-bound step figures to quote) eager_small with the four step arms
            running at once, each pinned to its own two cores (--cpus gives the 8), in the same
            2 s wall-clock slices, rotating cores every slice: the median step time of each arm in
            each slice, and the median of the per-slice ratios. One after another, processes of
            one arm differed by up to 1.4x on the H200 machine, more than the arms differ; at once,
            drift hits every arm alike. The four share the GPU, which this small step barely uses.
Prints a markdown table per benchmark with the ratio of each arm to `native`; tracking overhead is
history/native for PyTorch and memguard/mg_nostack for memguard.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SIZES = [512, 4096, 65536, 1 << 20, 16 << 20, 256 << 20]
ARMS = ("native", "history", "memguard", "mg_nostack", "floor")
STEP_ARMS = ARMS[:4]
# `together` also splits full tracking's cost: native stacks only, and Python stacks only.
TOGETHER_ARMS = ARMS + ("mg_native", "mg_python")
AB_ARMS = ARMS + ("mgb_nostack",)  # together with --lib-b
SMALL_AB_ARMS = STEP_ARMS + ("mgb",)  # small_together with --lib-b: mgb = --lib-b's library, full tracking
# The latency tables' ratio columns (those whose two arms ran).
RATIO_COLS = [("memguard", "native"), ("mg_nostack", "native"), ("floor", "native"), ("mg_nostack", "floor"),
              ("history", "native"), ("mg_native", "mg_nostack"), ("mg_python", "mg_nostack"),
              ("mgb_nostack", "native"), ("mgb_nostack", "mg_nostack")]
BENCHES = ("latency", "together", "eager", "eager_small", "small_together", "compiled")
STEP_KINDS = ("eager", "eager_small", "compiled")
FLOOR_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pluggable_floor.cpp")


def worker(spec):
    if spec.get("cpus"):
        # The same cores for every process: otherwise where the scheduler puts a process (which
        # core, which NUMA node) moves its latency by up to 2x, more than the arms differ.
        os.sched_setaffinity(0, spec["cpus"])
    import torch
    import torch.nn as nn
    # MGBENCH_DEVICE=cpu runs a worker on the CPU, to test this script's orchestration on a machine
    # without a GPU (no allocator is switched and the step's memory figures are 0).
    dev = torch.device(os.environ.get("MGBENCH_DEVICE", "cuda"))
    on_gpu = dev.type == "cuda"
    if spec["arm"] == "history" and on_gpu:
        torch.cuda.memory._record_memory_history(stacks="all", max_entries=100000)
    if spec["arm"] == "floor" and on_gpu:
        torch.cuda.memory.change_current_allocator(
            torch.cuda.memory.CUDAPluggableAllocator(spec["floor_lib"], "floor_alloc", "floor_free"))
    out = {"backend": torch.cuda.memory.get_allocator_backend() if on_gpu else "cpu"}
    if spec["bench"] == "together":
        return latency_together(spec, torch, dev, out)
    if spec["bench"] == "latency":
        lat = {}
        for n in SIZES:
            for _ in range(50):  # warm: the first allocation of a size makes its segment
                x = torch.empty(n, dtype=torch.uint8, device=dev)
                del x
            iters = spec["iters"] if n < (16 << 20) else max(spec["iters"] // 10, 100)
            t0 = time.perf_counter_ns()
            for _ in range(iters):
                x = torch.empty(n, dtype=torch.uint8, device=dev)
                del x
            lat[str(n)] = (time.perf_counter_ns() - t0) / iters
        out["latency_ns"] = lat
        return out
    # step: a GPT-style decoder-only block stack
    torch.manual_seed(0)
    d, layers, heads, seq, batch, vocab = spec["d"], spec["layers"], 16, spec["seq"], spec["batch"], 32000

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, mask):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False, is_causal=True)[0]
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.zeros(1, seq, d))
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.head = nn.Linear(d, vocab, bias=False)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

        def forward(self, t):
            x = self.emb(t) + self.pos
            for b in self.blocks:
                x = b(x, self.mask)
            return self.head(x)

    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step_model = torch.compile(model) if spec["compiled"] else model
    tokens = torch.randint(0, vocab, (batch, seq + 1), device=dev)
    def step_once():
        """One synchronized training step; its time in ms."""
        if on_gpu:
            torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits = step_model(tokens[:, :-1])
            loss = nn.functional.cross_entropy(logits.float().reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if on_gpu:
            torch.cuda.synchronize()
        return (time.perf_counter_ns() - t0) / 1e6

    times = [step_once() for _ in range(spec["warmup"] + spec["steps"])][spec["warmup"]:]
    if spec["bench"] == "steps_together":
        out["slices"] = steps_together(spec, step_once)
    out["step_ms"] = statistics.median(times)
    out["max_reserved"] = torch.cuda.max_memory_reserved() if on_gpu else 0
    out["max_allocated"] = torch.cuda.max_memory_allocated() if on_gpu else 0
    return out


def move_process(cpus):
    """Pins every thread of this process to `cpus`: sched_setaffinity(0) moves the calling thread
    only, and the helper threads (memguard's report writer, CUDA's) must move with the arm."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass  # a thread that just ended


def wait_for_go(spec):
    """Marks this worker ready, waits for the start signal; the agreed start time."""
    open(spec["ready_file"], "w").close()
    while not os.path.exists(spec["go_file"]):
        time.sleep(0.01)
    with open(spec["go_file"]) as f:
        return float(f.read())


def steps_together(spec, step_once):
    """Training steps in the same wall-clock slices as the other arms (see run_together): per
    slice, the median time of the steps that started in its first 85%. The arm moves to the next
    pair of cores every slice."""
    go = wait_for_go(spec)
    groups = spec["core_groups"]
    per_slice = []
    for r in range(spec["slices"]):
        move_process(groups[(spec["index"] + r) % len(groups)])
        start = go + r * spec["slice_s"]
        end = start + 0.85 * spec["slice_s"]
        while time.time() < start:
            pass
        times = []
        while time.time() < end:
            times.append(step_once())
        per_slice.append(statistics.median(times) if times else float("nan"))
    return per_slice


def latency_together(spec, torch, dev, out):
    """All arms at once, each on its own core, in the same wall-clock slices: slice r measures size
    SIZES[r % len(SIZES)] in every arm, so whatever the machine does meanwhile (frequency, other
    tenants) hits all arms alike and the per-slice ratios pair up."""
    for n in SIZES:
        for _ in range(50):
            x = torch.empty(n, dtype=torch.uint8, device=dev)
            del x
    go = wait_for_go(spec)
    per_slice = []
    for r in range(spec["slices"]):
        n = SIZES[r % len(SIZES)]
        if r % len(SIZES) == 0:
            # Every arm visits every pair of cores in turn: on a virtual machine cores differ in speed.
            groups = spec["core_groups"]
            move_process(groups[(spec["index"] + r // len(SIZES)) % len(groups)])
        start = go + r * spec["slice_s"]
        end = start + 0.9 * spec["slice_s"]  # the last tenth: slack for the slowest arm to stop
        while time.time() < start:
            pass
        count, t0 = 0, time.perf_counter_ns()
        while time.time() < end:
            for _ in range(50):
                x = torch.empty(n, dtype=torch.uint8, device=dev)
                del x
            count += 50
        per_slice.append([n, (time.perf_counter_ns() - t0) / count])
    out["slices"] = per_slice
    return out


def arm_env(args, arm):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    for k in list(env):
        if k.startswith("MEMGUARD_"):
            del env[k]
    if arm.startswith("mg") or arm == "memguard":
        env["LD_PRELOAD"] = os.path.abspath(args.lib_b if arm in ("mgb_nostack", "mgb") else args.lib)
        env["MEMGUARD_ALLOCATOR"] = "memguard"
        env["MEMGUARD_OUTPUT"] = os.path.join(args.tmp, "bench.%p.mgr")
        if arm in ("mg_nostack", "mg_python", "mgb_nostack"):
            env["MEMGUARD_STACK_DEPTH"] = "0"
        if arm in ("mg_nostack", "mg_native", "mgb_nostack"):
            env["MEMGUARD_PYTHON_STACKS"] = "0"
    return env


def check_backend(spec, result, stderr):
    if result["backend"] == "cpu":
        return  # MGBENCH_DEVICE=cpu
    want = "pluggable" if spec["arm"] in ("memguard", "floor") or spec["arm"].startswith("mg") else "native"
    if result["backend"] != want:
        raise SystemExit(f"arm {spec['arm']} ran with the {result['backend']} allocator\n{stderr[-2000:]}")


def run_one(args, spec):
    env = arm_env(args, spec["arm"])
    if spec.get("compiled"):
        # A fresh inductor cache per process: a warm cache compiles differently from a cold one,
        # so arms that ran after another would not compare (the project guide's rule).
        env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor.", dir=args.tmp)
    with tempfile.NamedTemporaryFile("r", suffix=".json", dir=args.tmp, delete=False) as f:
        path = f.name
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec), path], env=env,
                       capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        raise SystemExit(f"worker {spec} failed:\n{p.stderr[-3000:]}")
    with open(path) as f:
        result = json.load(f)
    check_backend(spec, result, p.stderr)
    for name in os.listdir(args.tmp):
        if name.endswith(".mgr"):
            os.unlink(os.path.join(args.tmp, name))
    return result


def run_together(args, floor_lib, cpus, slices, slice_s, arms=TOGETHER_ARMS, work=None):
    """One process per arm, all at once, each pinned to its own two cores: one for the thread
    that allocates, one for the process's helper threads (memguard's report writer, CUDA's own),
    which on a single core would take their time out of the measured thread's. `work`: the spec
    of a training step (steps_together); without it, torch.empty latency (latency_together)."""
    per_arm = 2
    if len(cpus) < per_arm * len(arms):
        cpus = list(range(2, 2 + per_arm * len(arms)))
        if cpus[-1] >= os.cpu_count():
            raise SystemExit(f"together: needs {per_arm * len(arms)} cores from core 2 on; give them with --cpus")
    groups = [cpus[per_arm * i:per_arm * (i + 1)] for i in range(len(arms))]
    go_file = os.path.join(args.tmp, "go")
    # A previous run's start signal and ready marks would start this run's workers at once.
    for name in ["go"] + [f"ready.{arm}" for arm in arms]:
        if os.path.exists(os.path.join(args.tmp, name)):
            os.unlink(os.path.join(args.tmp, name))
    procs = []
    for i, arm in enumerate(arms):
        spec = dict(work or {}, arm=arm, bench="steps_together" if work else "together", floor_lib=floor_lib,
                    cpus=groups[i], core_groups=groups, index=i, slices=slices, slice_s=slice_s, go_file=go_file,
                    ready_file=os.path.join(args.tmp, f"ready.{arm}"))
        path = os.path.join(args.tmp, f"together.{arm}.json")
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec), path],
                             env=arm_env(args, arm), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append((spec, path, p))
    deadline = time.time() + 600
    while not all(os.path.exists(s["ready_file"]) for s, _, _ in procs):
        if time.time() > deadline or any(p.poll() is not None for _, _, p in procs):
            for _, _, p in procs:
                p.kill()
            raise SystemExit("together: a worker failed before the start:\n" +
                             "".join((p.stderr.read() or "")[-1500:] for _, _, p in procs if p.poll() is not None))
        time.sleep(0.1)
    with open(go_file + ".tmp", "w") as f:
        f.write(repr(time.time() + 1.0))
    os.rename(go_file + ".tmp", go_file)
    results = {}
    for spec, path, p in procs:
        _, err = p.communicate(timeout=600 + slices * slice_s)
        if p.returncode != 0:
            raise SystemExit(f"worker {spec['arm']} failed:\n{err[-3000:]}")
        with open(path) as f:
            results[spec["arm"]] = json.load(f)
        check_backend(spec, results[spec["arm"]], err)
    return {arm: [r] for arm, r in results.items()}


def rotated(reps):
    for r in range(reps):
        yield [ARMS[(i + r) % len(ARMS)] for i in range(len(ARMS))]


def build_floor(tmp):
    out = os.path.join(tmp, "libpluggable_floor.so")
    cxx = os.environ.get("CXX", "g++")
    subprocess.run([cxx, "-O2", "-shared", "-fPIC", "-o", out, FLOOR_SRC, "-ldl"], check=True)
    return out


def run_all(args):
    reps = args.reps or (1 if args.quick else 3)
    benches = args.bench.split(",")
    for b in benches:
        if b not in BENCHES:
            raise SystemExit(f"--bench: unknown benchmark {b!r} (known: {', '.join(BENCHES)})")
    args.tmp = tempfile.mkdtemp(prefix="mgbench.")
    floor_lib = build_floor(args.tmp) if "latency" in benches or "together" in benches else None
    iters = 2000 if args.quick else 20000
    cpus = [int(c) for c in args.cpus.split(",")] if args.cpus else []
    step = {"cpus": cpus, "d": 1024, "layers": 4 if args.quick else 12, "seq": 1024, "batch": 8,
            "warmup": 3 if args.quick else 10, "steps": 5 if args.quick else 30}
    small = dict(step, d=512, layers=6, seq=128, batch=4, steps=20 if args.quick else 100)
    results = {b: {a: [] for a in ARMS} for b in benches if b not in ("together", "small_together")}
    together_arms = AB_ARMS if args.lib_b else TOGETHER_ARMS
    together = {
        # Each arm spends the same number of rounds (one slice per size) on every pair of cores.
        "together": lambda: run_together(args, floor_lib, cpus,
                                         slices=len(SIZES) * len(together_arms) * (args.rounds or (1 if args.quick else 3)),
                                         slice_s=0.25, arms=together_arms),
        "small_together": lambda: run_together(args, None, cpus, slices=10 if args.quick else 40, slice_s=2.0,
                                               arms=SMALL_AB_ARMS if args.lib_b else STEP_ARMS,
                                               work=dict(small, compiled=False, steps=5)),
    }
    for bench, run_once in together.items():
        if bench not in benches:
            continue
        results[bench] = {}
        for _ in range(reps):
            for arm, runs in run_once().items():
                results[bench].setdefault(arm, []).extend(runs)
    for order in rotated(reps):
        if "latency" in benches:
            for arm in order:
                spec = {"arm": arm, "bench": "latency", "iters": iters, "floor_lib": floor_lib, "cpus": cpus}
                results["latency"][arm].append(run_one(args, spec))
        for kind in STEP_KINDS:
            if kind not in benches:
                continue
            for arm in order:
                if arm not in STEP_ARMS or (kind == "compiled" and arm == "history"):
                    continue  # history's cost is measured on the eager steps; floor is latency only
                if args.arms and arm not in args.arms.split(","):
                    continue
                spec = dict(small if kind == "eager_small" else step, arm=arm, bench="step",
                            compiled=kind == "compiled")
                results[kind][arm].append(run_one(args, spec))
    results["meta"] = {"reps": reps, "quick": args.quick, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    return results


def merged(paths):
    results = {}
    for path in paths:
        with open(path) as f:
            part = json.load(f)
        for key, value in part.items():
            if key == "meta":
                results.setdefault("meta", []).append(value)
                continue
            for arm, runs in value.items():
                results.setdefault(key, {}).setdefault(arm, []).extend(runs)
    return results


def med(values):
    return statistics.median(values) if values else float("nan")


def ratio(a, b):
    return a / b if b == b and b else float("nan")


def print_tables(results):
    lat = results.get("latency")
    if lat:
        arms = [a for a in ARMS if lat.get(a)]
        n_proc = max(len(lat[a]) for a in arms)
        print(f"\n### Allocation + free latency through torch.empty (median ns, {n_proc} process(es) per arm)\n")
        cols = [c for c in RATIO_COLS if c[0] in arms and c[1] in arms]
        print("| size | " + " | ".join(arms) + " | " + " | ".join(f"{a} / {b}" for a, b in cols) + " |")
        print("|---|" + "---|" * (len(arms) + len(cols)))
        for n in SIZES:
            m = {a: med([r["latency_ns"][str(n)] for r in lat[a]]) for a in arms}
            print(f"| {n} | " + " | ".join(f"{m[a]:.0f}" for a in arms) + " | " +
                  " | ".join(f"{ratio(m[a], m[b]):.3f}" for a, b in cols) + " |")
    tog = results.get("together")
    if tog and all(tog.get(a) for a in ARMS):
        arms = [a for a in TOGETHER_ARMS + AB_ARMS[len(ARMS):] if tog.get(a)]
        runs = min(len(tog[a]) for a in arms)
        n_slices = sum(len(tog["native"][k]["slices"]) for k in range(runs))
        print(f"\n### Allocation + free latency through torch.empty, all arms at once ({runs} run(s), {n_slices} "
              "slices; median ns per slice, and the median of the per-slice ratios)\n")
        cols = [c for c in RATIO_COLS if c[0] in arms and c[1] in arms]
        print("| size | " + " | ".join(arms) + " | " + " | ".join(f"{a} / {b}" for a, b in cols) + " |")
        print("|---|" + "---|" * (len(arms) + len(cols)))
        for n in SIZES:
            ns = {a: [] for a in arms}
            ratios = {c: [] for c in cols}
            for k in range(runs):
                per_arm = {a: tog[a][k]["slices"] for a in arms}
                for r in range(min(len(v) for v in per_arm.values())):
                    if per_arm["native"][r][0] != n:
                        continue
                    for a in arms:
                        ns[a].append(per_arm[a][r][1])
                    for a, b in cols:
                        ratios[(a, b)].append(per_arm[a][r][1] / per_arm[b][r][1])
            print(f"| {n} | " + " | ".join(f"{med(ns[a]):.0f}" for a in arms) + " | " +
                  " | ".join(f"{med(ratios[c]):.3f}" for c in cols) + " |")
        if runs > 1:
            # Whether the runs agree: each run's median per-slice ratio over all sizes.
            print("\n| run | " + " | ".join(f"{a} / {b}" for a, b in cols) + " |")
            print("|---|" + "---|" * len(cols))
            per_run = []
            for k in range(runs):
                per_arm = {a: tog[a][k]["slices"] for a in arms}
                slices = range(min(len(v) for v in per_arm.values()))
                per_run.append([med([per_arm[a][r][1] / per_arm[b][r][1] for r in slices]) for a, b in cols])
                print(f"| {k + 1} | " + " | ".join(f"{v:.3f}" for v in per_run[-1]) + " |")
            if runs > 1:
                # Whole runs are the samples of an A/B (a process keeps its speed for its life).
                print("| median run | " + " | ".join(f"{med([r[i] for r in per_run]):.3f}" for i in range(len(cols)))
                      + " |")
    st = results.get("small_together")
    if st and all(st.get(a) for a in STEP_ARMS):
        step_arms = SMALL_AB_ARMS if st.get("mgb") else STEP_ARMS
        runs = min(len(st[a]) for a in step_arms)
        cols = [("history", "native"), ("memguard", "native"), ("mg_nostack", "native"), ("memguard", "mg_nostack")]
        if "mgb" in step_arms:
            cols += [("mgb", "native"), ("mgb", "memguard")]
        ms = {a: [] for a in step_arms}
        ratios = {c: [] for c in cols}
        per_run = []
        for k in range(runs):
            sl = {a: st[a][k]["slices"] for a in step_arms}
            n = min(len(v) for v in sl.values())
            ok = [r for r in range(n) if all(sl[a][r] == sl[a][r] for a in step_arms)]  # no NaN
            for a in step_arms:
                ms[a] += [sl[a][r] for r in ok]
            for a, b in cols:
                ratios[(a, b)] += [sl[a][r] / sl[b][r] for r in ok]
            per_run.append({c: med([sl[c[0]][r] / sl[c[1]][r] for r in ok]) for c in cols})
        print(f"\n### GPT-style training step, eager_small, the {len(step_arms)} arms at once ({runs} run(s), "
              f"{len(ratios[cols[0]])} slices of 2 s; median step ms per slice, and the median of the per-slice "
              "ratios)\n")
        print("| arm | step ms | max reserved MiB | ratio |")
        print("|---|---|---|---|")
        b_res = med([r["max_reserved"] for r in st["native"]])
        for a in step_arms:
            res = med([r["max_reserved"] for r in st[a]])
            print(f"| {a} | {med(ms[a]):.2f} | {res / 2**20:.0f} | {ratio(res, b_res):.3f} |")
        print("\n| run | " + " | ".join(f"{a} / {b}" for a, b in cols) + " |")
        print("|---|" + "---|" * len(cols))
        for k, pr in enumerate(per_run):
            print(f"| {k + 1} | " + " | ".join(f"{pr[c]:.3f}" for c in cols) + " |")
        print("| all | " + " | ".join(f"{med(ratios[c]):.3f}" for c in cols) + " |")
    for kind in STEP_KINDS:
        if not results.get(kind) or not results[kind].get("native"):
            continue
        n_proc = len(results[kind]["native"])
        print(f"\n### GPT-style training step, {kind} (bf16 autocast, AdamW; median of {n_proc} per-process medians)\n")
        print("| arm | step ms | ratio | max reserved MiB | ratio |")
        print("|---|---|---|---|---|")
        base = results[kind]["native"]
        b_ms, b_res = med([r["step_ms"] for r in base]), med([r["max_reserved"] for r in base])
        for a in STEP_ARMS:
            rs = results[kind].get(a)
            if not rs:
                continue
            ms, res = med([r["step_ms"] for r in rs]), med([r["max_reserved"] for r in rs])
            print(f"| {a} | {ms:.2f} | {ms / b_ms:.3f} | {res / 2**20:.0f} | {res / b_res:.3f} |")
    kinds = [k for k in ("eager", "eager_small") if all((results.get(k) or {}).get(a) for a in STEP_ARMS)]
    have_l = lat and all(lat.get(a) for a in STEP_ARMS)
    if not (kinds or have_l):
        return

    def step(kind, a):
        return med([r["step_ms"] for r in results[kind][a]])

    def l4k(a):
        return med([r["latency_ns"]["4096"] for r in lat[a]]) if have_l else float("nan")

    print("\n### Tracking overhead (full native + Python stacks on every block)\n")
    print("| tracker | " + " | ".join(f"{k} step ratio" for k in kinds) + " | 4 KiB alloc+free ratio |")
    print("|---|" + "---|" * (len(kinds) + 1))
    for label, tracked, base in (("PyTorch _record_memory_history(stacks=\"all\") vs native", "history", "native"),
                                 ("memguard full tracking vs memguard without stacks", "memguard", "mg_nostack"),
                                 ("memguard full tracking vs native", "memguard", "native")):
        print(f"| {label} | " + " | ".join(f"{ratio(step(k, tracked), step(k, base)):.3f}" for k in kinds) +
              f" | {ratio(l4k(tracked), l4k(base)):.3f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/lib/libmemguard.so")
    ap.add_argument("--arms", default=None, help="latency and step benches: only these arms (comma-separated), "
                    "e.g. native,memguard for paired runs of the compiled step")
    ap.add_argument("--lib-b", default=None, help="a second build: together runs it as the arm mgb_nostack, "
                    "small_together as mgb (full tracking)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="together: rounds per pair of cores in each run (default 3; --quick 1). Processes of one "
                         "build differ by several percent for their whole life, so an A/B of two builds needs many "
                         "runs (--reps) more than long ones")
    ap.add_argument("--quick", action="store_true", help="a short version (fewer repetitions, iterations, steps)")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--bench", default=",".join(BENCHES), help="comma-separated subset of " + ",".join(BENCHES))
    ap.add_argument("--cpus", default="", help="comma-separated CPU ids every worker is pinned to (default: not pinned)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--tables", nargs="+", metavar="JSON", help="print the tables of saved runs (merged)")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        result = worker(json.loads(args.worker[0]))
        with open(args.worker[1], "w") as f:
            json.dump(result, f)
        return
    if args.tables:
        print_tables(merged(args.tables))
        return
    if not os.path.isfile(args.lib):
        raise SystemExit(f"--lib: {args.lib} is not a file (build memguard first)")
    if args.lib_b and not os.path.isfile(args.lib_b):
        raise SystemExit(f"--lib-b: {args.lib_b} is not a file")
    results = run_all(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print_tables(results)


if __name__ == "__main__":
    main()
