# Issue 21 on a real GPU: what held the memory of memguard's collections (`memguard cycles --explain`),
# the collection after a recomputed backward (Megatron-style full recompute), periodic collections at
# step ends, and the time budget. The workloads are workloads/cycles.py and workloads/compile_garbage.py;
# the benchmark is bench/gpu/gc_compile_sequence.py. Exec'd by acceptance.py (check, workload, records,
# reports, HERE, Skip, ctx are its names); every helper here starts with _cy_ (one namespace).
#
# MEMGUARD_CYCLES_DEVICE=cpu runs the same checks with tiny sizes on a machine without a GPU (a dry
# run of the code paths: the CUDA figures are absent, and the checks that need them say so and
# assert only what the CPU shows).

_CY_DEVICE = os.environ.get("MEMGUARD_CYCLES_DEVICE", "cuda")
_CY_CUDA = _CY_DEVICE == "cuda"
_CY_MIB = 1 << 20
_CY_GIB = 1 << 30
_CY_HOLD_MIB = 512 if _CY_CUDA else 2
# workloads/cycles.py's sizes per scenario: on the H200, and for the CPU dry run
_CY_SIZES = {
    "recompute": ("--layers 6 --tokens 4096 --hidden 4096 --iterations 2",
                  "--layers 6 --tokens 64 --hidden 64 --iterations 2"),
    "periodic": ("--steps 8 --leak-mib 256 --hidden 1024", "--steps 6 --leak-mib 2 --hidden 64"),
    "budget": ("--layers 6 --tokens 4096 --hidden 2048 --seconds 20 --heap-objects 2000000",
               "--layers 6 --tokens 32 --hidden 32 --seconds 8 --heap-objects 200000"),
}
# The budget check's fraction: small, yet within reach of one 20 s run. Exponential back-off costs
# about log2(chances) collections before it reaches the budget (each a full collection of the heap,
# 0.1-0.3 s): at 0.01 that alone is several budgets of a 30 s run, at 0.05 one or two.
_CY_BUDGET = "0.05"
_CY_MEMGUARDS = ("memguard", "recompute", "step")  # format::is_memguards
# On the CPU no collection frees CUDA memory, so the budget would back off the triggers the dry run
# exercises: a fraction of 1 never does (the budget check sets its own).
_CY_DRY_ENV = {} if _CY_CUDA else {"MEMGUARD_GC_BUDGET": "1"}


def _cy_run(ctx, scenario, arm, preload=True, env=None, collects=True):
    """Runs workloads/cycles.py SCENARIO once per (scenario, arm); returns (result, report or None).
    A preloaded run has one report; on the CPU only when memguard collects (`collects`): without
    CUDA, a report is made by the first record there is to write."""
    sizes = _CY_SIZES[scenario][0 if _CY_CUDA else 1].split()
    data = workload(ctx, "cycles", f"{scenario}_{arm}", preload, {**_CY_DRY_ENV, **(env or {})},
                    (scenario, "--device", _CY_DEVICE, *sizes))
    files = reports(ctx, f"cycles_{scenario}_{arm}.")
    if preload and (collects or _CY_CUDA or files):
        assert len(files) == 1, (files, data["stderr"][-3000:])
    return data, (files[0] if files else None)


def _cy_int(f, i):
    return None if len(f) <= i or f[i] == "-" else int(f[i])


def _cy_ys(path):
    """The Y records (collections) of a report as dicts; minor 9's skipped and explain fields when there
    (none without a report)."""
    out = []
    if path is None:
        return out
    for f in records(path, {"Y"}):
        out.append({"t": int(f[1]), "trigger": f[3], "generation": int(f[4]), "duration_ns": int(f[5]),
                    "collected": int(f[6]), "cuda_bytes_freed": _cy_int(f, 8), "skipped": _cy_int(f, 11),
                    "explain": f[12] if len(f) > 12 and f[12] != "-" else None})
    return out


def _cy_dec(s):
    import urllib.parse
    return "" if s == "%" else urllib.parse.unquote(s)


def _cy_explanations(path):
    """The explanations of a report (j, u, y and r records, minor 9), by id: objects, cuda_bytes,
    groups [(kind, count, cuda_bytes held, name)], storages [dict], chains {addr: [(step, object, edge)]}."""
    ex = {}
    for f in records(path, {"j", "u", "y", "r"}):
        if f[0] == "j":
            ex[f[3]] = {"objects": int(f[4]), "tensors": int(f[5]), "cuda_bytes": int(f[6]),
                        "analysis_ns": int(f[7]), "complete": f[8] == "1", "groups": [], "storages": [], "chains": {}}
        elif f[1] in ex and f[0] == "u":
            ex[f[1]]["groups"].append((f[2], int(f[3]), int(f[4]), _cy_dec(f[5])))
        elif f[1] in ex and f[0] == "y":
            ex[f[1]]["storages"].append({"device": int(f[2]), "addr": f[3], "size": int(f[4]), "how": f[5],
                                         "category": f[6], "holder": None if f[7] == "-" else _cy_dec(f[7])})
        elif f[1] in ex and f[0] == "r":
            ex[f[1]]["chains"].setdefault(f[2], []).append(
                (int(f[3]), _cy_dec(f[4]), None if len(f) < 6 or f[5] == "-" else _cy_dec(f[5])))
    for e in ex.values():
        for steps in e["chains"].values():
            steps.sort()
    return ex


def _cy_cli(ctx, *args):
    """`memguard ARGS` printed (the first 40 lines); returns the process."""
    p = ctx.run([str(ctx.cli), *args], check=False)
    print(f"  $ memguard {' '.join(a if not a.startswith('/') else Path(a).name for a in args)} (exit {p.returncode})")
    print("    " + "\n    ".join((p.stdout or p.stderr).rstrip().splitlines()[:40]))
    return p


def _cy_cli_json(ctx, *args):
    p = ctx.run([str(ctx.cli), *args, "--json"], check=False)
    assert p.returncode == 0, f"memguard {' '.join(args)} --json exited {p.returncode}: {p.stderr[-1500:]}"
    return json.loads(p.stdout)


def _cy_cli_explanations(doc):
    """The explanations in `memguard cycles --explain --json` output, each as (strings, integers) found
    anywhere inside it. The CLI's key names are its own: the values under any key naming an
    explanation ("explanations", "explanation", ...) are the explanations; without one, the whole
    document is one."""
    found = []

    def find(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if "explan" in k.lower() and isinstance(v, (dict, list)):
                    found.extend(x for x in (v if isinstance(v, list) else [v]) if isinstance(x, dict))
                else:
                    find(v)
        elif isinstance(o, list):
            for v in o:
                find(v)

    def flatten(o, strs, ints):
        if isinstance(o, dict):
            for k, v in o.items():
                flatten(v, strs, ints)
        elif isinstance(o, list):
            for v in o:
                flatten(v, strs, ints)
        elif isinstance(o, str):
            strs.append(o)
        elif isinstance(o, int) and not isinstance(o, bool):
            ints.add(o)
        return strs, ints

    find(doc)
    return [flatten(e, [], set()) for e in (found or [doc])]


def _cy_cli_trigger_bytes(doc, trigger):
    """CUDA bytes freed by one trigger in `memguard cycles --json` (totals.<trigger>.cuda_bytes_freed,
    or a list of per-trigger rows naming it), or None when the CLI does not list it."""
    totals = doc.get("totals", doc.get("triggers"))
    if isinstance(totals, dict) and isinstance(totals.get(trigger), dict):
        return totals[trigger].get("cuda_bytes_freed")
    if isinstance(totals, list):
        for row in totals:
            if isinstance(row, dict) and trigger in (row.get("trigger"), row.get("name")):
                return row.get("cuda_bytes_freed")
    return None


def _cy_dry(what):
    print(f"  (dry run on {_CY_DEVICE}: {what} not checked)")


@check("cycles", "compile garbage with --explain: the frames that held the 512 MiB tensors, named with their sizes")
def _cy_compile_explain(ctx):
    data = workload(ctx, "compile_garbage", "explain", True, {},
                    ("--device", _CY_DEVICE, "--layers", "4", "--hold-mib", str(_CY_HOLD_MIB), "--frame-locals"))
    files = reports(ctx, "compile_garbage_explain.")
    assert len(files) == 1, files
    path = files[0]
    hold = _CY_HOLD_MIB * _CY_MIB
    line = next(i + 1 for i, l in enumerate((HERE / "workloads" / "compile_garbage.py").read_text().splitlines())
                if l.startswith("def leaky_backend("))
    ys = [y for y in _cy_ys(path) if y["trigger"] in _CY_MEMGUARDS]
    ex = _cy_explanations(path)
    print(f"  workload: {data['call0_leaked']} tensors of {_CY_HOLD_MIB} MiB held by the backend's frames, alive at "
          f"each backward {data['call0_alive_at_backward']}; memguard's collections {len(ys)} "
          f"({', '.join(sorted({y['trigger'] for y in ys}))}), explanations {len(ex)}")
    assert ys, "no collection of memguard's"
    _cy_cli(ctx, "cycles", "--explain", str(path))
    if not _CY_CUDA:
        _cy_dry("CUDA storages of the garbage, their frames and sizes")
        return
    big, named = 0, 0
    for eid, e in sorted(ex.items(), key=lambda kv: int(kv[0])):
        frames = [(n, held, name) for kind, n, held, name in e["groups"] if kind == "frame"]
        held = [s for s in e["storages"] if s["size"] >= hold]
        big += len(held)
        print(f"  explanation {eid}: {e['objects']} objects, {e['cuda_bytes'] / _CY_MIB:.0f} MiB in {e['tensors']} "
              f"storages ({len(held)} of {_CY_HOLD_MIB} MiB), look {e['analysis_ns'] / 1e6:.0f} ms"
              f"{'' if e['complete'] else ' (partial)'}, {len(e['chains'])} chains; frames {frames[:3]}")
        for s in held:
            chain = e["chains"].get(s["addr"])
            if chain is None:
                continue  # only the largest storages get a chain
            print(f"    {s['size'] / _CY_MIB:.0f} MiB ({s['how']}, {s['category']}): "
                  + " -> ".join(f"{o}" + (f" [{edge}]" if edge else "") for _, o, edge in chain))
            holder, edge = chain[0][1], chain[0][2]
            assert holder.startswith("frame leaky_backend ") and "compile_garbage.py:" in holder, chain
            assert edge and "scratch" in edge, chain
            named += 1
        if held:  # the backend's frames are named, credited with (at least) the storages they held
            assert any(name.startswith("leaky_backend ") and "compile_garbage.py:" in name
                       and b >= len(held) * hold for _, b, name in frames), frames
    print(f"  {big} storages of {_CY_HOLD_MIB} MiB explained ({data['call0_leaked']} held), {named} with a chain "
          f"from frame leaky_backend (compile_garbage.py:{line})")
    assert big >= 0.75 * data["call0_leaked"] and named >= 1, (big, named)
    doc = _cy_cli_json(ctx, "cycles", "--explain", str(path))
    cli = [(s, i) for s, i in _cy_cli_explanations(doc)
           if any("leaky_backend" in x and "compile_garbage.py:" in x for x in s)]
    sized = [1 for s, i in cli
             if hold in i or any(f"{_CY_HOLD_MIB}.0 MiB" in x or f"{_CY_HOLD_MIB} MiB" in x for x in s)]
    print(f"  cycles --explain --json: {len(_cy_cli_explanations(doc))} explanations, {len(cli)} name frame "
          f"leaky_backend in compile_garbage.py, {len(sized)} with the {_CY_HOLD_MIB} MiB size")
    assert cli and sized, json.dumps(doc)[:3000]


@check("cycles", "Megatron-style recompute: lower backward peak with the recompute trigger, bitwise-equal losses and grads")
def _cy_recompute(ctx):
    off, off_path = _cy_run(ctx, "recompute", "off", env={"MEMGUARD_COLLECT_RECOMPUTE_GARBAGE": "0"},
                            collects=False)
    on, on_path = _cy_run(ctx, "recompute", "on")
    plain, _ = _cy_run(ctx, "recompute", "plain", preload=False)
    arms = (("trigger on", on), ("trigger off", off), ("no memguard", plain))
    for name, d in arms:
        alive = [[p["alive"] for p in it] for it in d["probes"]]
        oldest = [[p["oldest"] for p in it] for it in d["probes"]]
        peaks = ", ".join(f"{b / 1e9:.2f} GB" for b in d.get("backward_peak", []))
        print(f"  {name:12s}: backward incremental peak {peaks or '-'}; previous layer's cycle alive at each "
              f"backward {alive}, in generation 2 {oldest}; losses {d['losses']}; grads {d['grads_sha256'][:16]}; "
              f"{d['seconds']:.1f} s")
    held = on["held_bytes_per_layer"]
    print(f"  each recomputed backward leaves {held[0] / _CY_MIB:.0f} MiB in its cycle")
    for name, d in arms[1:]:
        assert all(p["alive"] and p["oldest"] for it in d["probes"] for p in it), (name, d["probes"])
    assert not any(p["alive"] for it in on["probes"] for p in it), on["probes"]
    assert on["losses"] == off["losses"] == plain["losses"], "losses differ"
    assert on["grads_sha256"] == off["grads_sha256"] == plain["grads_sha256"], "gradients differ"
    rc = [y for y in _cy_ys(on_path) if y["trigger"] == "recompute"]
    assert not [y for y in _cy_ys(off_path) if y["trigger"] == "recompute"], "recompute collections, trigger off"
    freed = sum(y["cuda_bytes_freed"] or 0 for y in rc)
    print(f"  recompute collections: {len(rc)} (chances {on['chances']}), CUDA bytes freed {freed / _CY_GIB:.2f} GiB, "
          f"{sum(y['duration_ns'] for y in rc) / 1e6:.1f} ms")
    assert len(rc) >= on["chances"], (len(rc), on["chances"])
    _cy_cli(ctx, "cycles", str(on_path))
    if not _CY_CUDA:
        _cy_dry("backward peaks and CUDA bytes freed")
        return
    layers = len(held)
    saved = off["backward_peak"][-1] - on["backward_peak"][-1]
    print(f"  the trigger lowered the backward peak by {saved / 1e9:.2f} GB "
          f"({saved / ((layers - 1) * held[0]):.2f} of {layers - 1} layers' cycles)")
    assert saved >= 0.5 * (layers - 1) * held[0], saved
    assert abs(plain["backward_peak"][-1] - off["backward_peak"][-1]) <= 0.05 * off["backward_peak"][-1], \
        "memguard with the trigger off changed the peak"
    assert freed >= 0.9 * sum(held) * len(on["losses"]), (freed, held)
    doc = _cy_cli_json(ctx, "cycles", str(on_path))
    cli = _cy_cli_trigger_bytes(doc, "recompute")
    print(f"  cycles --json: recompute cuda_bytes_freed {cli}")
    assert cli is not None and cli >= 0.9 * freed, cli


@check("cycles", "periodic mode: MEMGUARD_GC_EVERY_STEPS=1 frees a per-step cycle at each step; without it, steps shows the growth")
def _cy_periodic(ctx):
    every, every_path = _cy_run(ctx, "periodic", "every", env={"MEMGUARD_GC_EVERY_STEPS": "1"})
    none, none_path = _cy_run(ctx, "periodic", "none", collects=False)
    per = every["bytes_per_step"]
    steps = len(every["alive_after_step"])
    print(f"  each step leaves a cycle holding {per / _CY_MIB:.0f} MiB; leaked tensors alive after each step: "
          f"every step {every['alive_after_step']}, off {none['alive_after_step']}")
    found = _cy_cli_json(ctx, "steps", str(every_path))["steps"]
    print(f"  steps in the report: {len(found)} ({sorted({s.get('source') for s in found})})")
    assert len(found) == steps, found
    ys = [y for y in _cy_ys(every_path) if y["trigger"] == "step"]
    print(f"  step collections: {len(ys)}, freed " + ", ".join(
        "-" if y["cuda_bytes_freed"] is None else f"{y['cuda_bytes_freed'] / _CY_MIB:.0f} MiB" for y in ys))
    assert len(ys) >= steps, (len(ys), steps)
    assert max(every["alive_after_step"]) <= 1, every["alive_after_step"]
    assert none["alive_at_end"] >= steps - 1 and not [y for y in _cy_ys(none_path) if y["trigger"] == "step"]
    _cy_cli(ctx, "cycles", str(every_path))
    if not _CY_CUDA:
        _cy_dry("CUDA bytes freed and the growth")
        return
    freeing = [y for y in ys if (y["cuda_bytes_freed"] or 0) >= 0.9 * per]
    assert len(freeing) >= steps - 1, [y["cuda_bytes_freed"] for y in ys]
    _cy_cli(ctx, "steps", str(none_path))
    growth = _cy_cli_json(ctx, "steps", str(none_path)).get("growth")
    assert growth, "memguard steps found no growth"
    print(f"  growth without periodic collections: {growth['per_step_bytes'] / _CY_MIB:.1f} MiB a step over steps "
          f"{growth['first_step']}-{growth['last_step']}; sites {[s['label'] for s in growth.get('sites', [])[:2]]}")
    assert 0.9 * per <= growth["per_step_bytes"] <= 1.35 * per, growth["per_step_bytes"]
    # The program's gc.collect() after the last step frees every cycle: `memguard steps` says which
    # part of the growth later collections freed (growth.fate, issue 21) where the CLI has it.
    fate = growth.get("fate")
    if isinstance(fate, dict):
        print(f"  fate of the growth: {fate.get('growth_bytes', 0) / _CY_MIB:.0f} MiB, freed by later collections "
              f"{fate.get('collected_bytes', 0) / _CY_MIB:.0f} MiB, held "
              f"{fate.get('held_bytes', 0) / _CY_MIB:.0f} MiB; "
              f"collections {[(c.get('trigger'), c.get('bytes')) for c in fate.get('collections', [])][:4]}")
        assert fate.get("collected_bytes", 0) >= 0.5 * fate.get("growth_bytes", 0) > 0, fate
    else:
        print("  memguard steps says nothing of what collections freed (no growth.fate in this CLI)")


@check("cycles", "budget: collections that free nothing on a large heap back off; recompute time within a few budgets")
def _cy_budget(ctx):
    data, path = _cy_run(ctx, "budget", "small", env={"MEMGUARD_GC_BUDGET": _CY_BUDGET})
    budget = float(_CY_BUDGET)
    info = dict((f[1], f[2]) for f in records(path, {"I"}))
    rc = [y for y in _cy_ys(path) if y["trigger"] == "recompute"]
    spent = sum(y["duration_ns"] for y in rc) / 1e9
    skipped = sum(y["skipped"] or 0 for y in rc)
    chances = data["chances"]
    used = spent / (budget * data["seconds"])
    mean = spent / len(rc) if rc else 0.0
    print(f"  heap {data['heap_objects']} objects, a full collection {data['full_collection_s'] * 1e3:.0f} ms; "
          f"{chances} recomputed backwards in {data['loop_s']:.1f} s (run {data['seconds']:.1f} s); I gc_budget "
          f"{info.get('gc_budget')}")
    print(f"  recompute collections: {len(rc)}, skipped by the budget {skipped} ({[y['skipped'] for y in rc]}), "
          f"freed {[y['cuda_bytes_freed'] for y in rc][:12]}; time {spent * 1e3:.0f} ms, {used:.2f} of the budget "
          f"({budget} x {data['seconds']:.1f} s); without the back-off: about {chances * mean:.1f} s")
    _cy_cli(ctx, "cycles", str(path))
    p = ctx.run([str(ctx.cli), "cycles", str(path), "--json"], check=False)
    if p.returncode == 0:
        doc = json.loads(p.stdout)
        print(f"  cycles --json: budget {doc.get('budget')}; recompute {doc.get('totals', {}).get('recompute')}")
    assert info.get("gc_budget") is not None and float(info["gc_budget"]) == budget, info.get("gc_budget")
    assert rc and skipped > 0, "no recompute collection skipped"
    assert len(rc) + skipped <= chances, (len(rc), skipped, chances)
    import math
    # doubling skips (1, 2, 4, ...) reach the cap of 1024 after about log2(chances) collections;
    # from there on one in 1025 chances at most
    bound = math.ceil(math.log2(chances)) + 4 + chances // 1025
    assert len(rc) <= bound, f"{len(rc)} collections for {chances} chances (at most {bound}): no exponential back-off"
    if not _CY_CUDA:
        _cy_dry("the time within the budget (this host's collections and chances are not the H200's)")
        return
    assert used <= 4.0, f"recompute collections took {used:.2f} budgets"


@check("cycles", "benchmark: memguard's collection time per cold compile sequence against the seed's (2 reps of 2 layers, alternating)")
def _cy_bench(ctx):
    out = ctx.out / "gc_compile_sequence.json"
    cmd = [ctx.python, str(HERE.parent.parent / "bench" / "gpu" / "gc_compile_sequence.py"), "--reps", "2",
           "--layers", "2", "--device", _CY_DEVICE, "--json", str(out),
           "--workdir", str(ctx.out / "gc_compile_sequence")]
    if ctx.venv:
        cmd += ["--cli", str(ctx.cli)]
    else:
        cmd += ["--lib", str(ctx.lib)]
    if not _CY_CUDA:
        cmd += ["--backend", "aot_eager", "--heap-objects", "300000", "--width", "64"]
    p = ctx.run(cmd, timeout=560)
    print("    " + "\n    ".join(p.stdout.rstrip().splitlines()[-20:]))
    r = json.loads(out.read_text())
    assert r["arms"]["seed"]["collections"] > 0 and r["arms"]["memguard"]["collections"] > 0, r["arms"]
    assert r["same_losses"], "the arms' losses differ"
