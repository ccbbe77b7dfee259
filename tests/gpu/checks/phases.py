# Phases (memguard.phase, NVTX ranges from torch.cuda.nvtx) measured
# by memguard against PyTorch's own counters. Exec'd by acceptance.py (check, workload, reports,
# records, ctx are its names).
#
# In interposition mode memguard sees what PyTorch asks CUDA for (segments), not tensors. So:
#  - with the caching allocator, a phase's incremental peak in memguard must equal PyTorch's
#    segment-level figure, max_memory_reserved() - memory_reserved() at entry, exactly;
#  - with PYTORCH_NO_CUDA_MEMORY_CACHING=1 every tensor is its own cudaMalloc of its exact size, so
#    memguard's incremental peak is tensor-level. PyTorch keeps no statistics on that path
#    (uncached_allocate bypasses them: its counters stay 0), so the reference comes from the caching
#    run, which makes the same tensors in the same order: the peak-minus-entry of the caching
#    allocator's requested bytes (the tensors' own sizes). max_memory_allocated()'s delta is
#    printed next to it; it counts whole blocks (rounded to 512 bytes, and a block is not split
#    when at most 1 MiB would remain), so it may exceed the tensor-level figure.

_PHASE_ROUNDING = 512


def _phase_run(ctx, tag, uncached):
    data = workload(ctx, "phases_train", tag, True,
                    env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1" if uncached else "0"})
    files = reports(ctx, f"phases_train_{tag}.")
    assert len(files) == 1, files
    phases = json.loads(ctx.run([str(ctx.cli), "phases", "--json", str(files[0])]).stdout)
    return data, files[0], {p["name"]: p for p in phases}, phases


def _mib(n):
    return f"{n / (1 << 20):10.3f}"


def _blocks_counted(path, begin_id):
    """GPU blocks live at the phase's B plus those allocated before its b (bounds the rounding)."""
    live, counted, inside = set(), 0, False
    for r in records(path, {"A", "F", "B", "b"}):
        if r[0] == "A" and r[5] in ("device", "async", "managed"):
            live.add(r[3])
            counted += inside
        elif r[0] == "F":
            live.discard(r[3])
        elif r[0] == "B" and r[3] == begin_id:
            inside, counted = True, len(live)
        elif r[0] == "b" and r[3] == begin_id:
            return counted
    return counted


@check("phases", "phases (caching allocator): memguard incremental peak = max_memory_reserved delta, exactly")
def phases_reserved_exact(ctx):
    data, report, by_name, _ = _phase_run(ctx, "cached", uncached=False)
    print(f"torch {data['torch']}, report {report.name}")
    print(f"{'phase':22} {'torch alloc incr':>16} {'torch resv incr':>16} {'memguard incr':>14} "
          f"{'torch resv entry':>16} {'memguard entry':>15}  (MiB)")
    bad = []
    for row in data["rows"]:
        mg = by_name.get(row["name"])
        assert mg is not None, f"memguard phases has no phase {row['name']!r}: {sorted(by_name)}"
        t_alloc = row["allocated_peak"] - row["allocated_entry"]
        t_resv = row["reserved_peak"] - row["reserved_entry"]
        print(f"{row['name']:22} {_mib(t_alloc):>16} {_mib(t_resv):>16} {_mib(mg['incremental_peak_bytes']):>14} "
              f"{_mib(row['reserved_entry']):>16} {_mib(mg['entry_bytes']):>15}")
        assert mg["source"] == "api", mg
        if mg["incremental_peak_bytes"] != t_resv:
            bad.append((row["name"], mg["incremental_peak_bytes"], t_resv))
    assert not bad, f"incremental peaks differ from PyTorch's reserved deltas: {bad}"
    assert any(r["reserved_peak"] > r["reserved_entry"] for r in data["rows"]), "no phase grew the reserve"


@check("phases", "phases (PYTORCH_NO_CUDA_MEMORY_CACHING=1): memguard incremental peak = the tensors' peak delta (torch requested bytes)")
def phases_allocated_tensor_level(ctx):
    cached, _, _, _ = _phase_run(ctx, "cached", uncached=False)
    uncached, report, by_name, _ = _phase_run(ctx, "uncached", uncached=True)
    torch_rows = {r["name"]: r for r in cached["rows"]}
    print(f"torch {uncached['torch']}, report {report.name}; PyTorch's counters in the uncached run: "
          f"max_memory_allocated={max(r['allocated_peak'] for r in uncached['rows'])}")
    print(f"{'phase':22} {'torch alloc incr':>16} {'torch reqd incr':>16} {'memguard incr':>14} "
          f"{'diff bytes':>11} {'tolerance':>10}  (MiB; diff = memguard - requested)")
    bad, exact = [], 0
    for name, row in torch_rows.items():
        mg = by_name.get(name)
        assert mg is not None, f"memguard phases has no phase {name!r}"
        t_alloc = row["allocated_peak"] - row["allocated_entry"]
        t_reqd = row["requested_peak"] - row["requested_entry"]
        diff = mg["incremental_peak_bytes"] - t_reqd
        exact += diff == 0
        tolerance = _PHASE_ROUNDING * _blocks_counted(report, str(mg["id"]))
        print(f"{name:22} {_mib(t_alloc):>16} {_mib(t_reqd):>16} {_mib(mg['incremental_peak_bytes']):>14} "
              f"{diff:>11} {tolerance:>10}")
        if abs(diff) > tolerance:
            bad.append((name, mg["incremental_peak_bytes"], t_reqd, tolerance))
    print(f"{exact} of {len(torch_rows)} phases agree to the byte")
    assert cached["losses"] == uncached["losses"], "the two runs computed different losses"
    assert not bad, f"incremental peaks outside the rounding tolerance: {bad}"


@check("phases", "phases: torch.cuda.nvtx ranges (push/pop and start/end) show up as phases")
def phases_from_nvtx(ctx):
    data, report, by_name, phases = _phase_run(ctx, "cached", uncached=False)
    for name in data["nvtx"]:
        p = by_name.get(name)
        print(f"{name:22} " + (f"source {p['source']:10} thread {p['thread']} ended {p['ended']} "
                               f"entry {_mib(p['entry_bytes'])} peak {_mib(p['peak_bytes'])} "
                               f"incr {_mib(p['incremental_peak_bytes'])} MiB" if p else "MISSING"))
    sources = {}
    for p in phases:
        sources[p["source"]] = sources.get(p["source"], 0) + 1
    print("phases by source:", sources)
    for name in data["nvtx"]:
        p = by_name.get(name)
        assert p is not None, f"NVTX range {name!r} is not a phase"
        assert p["source"] == ("nvtx" if name.startswith("nvtx step") else "nvtx_range"), p
        assert p["ended"] and p["thread"] == data["tid"], p
    # A step's window holds its memguard phases: its peak is at least theirs.
    for name in data["nvtx"]:
        if not name.startswith("nvtx step"):
            continue
        i = name.rsplit(" ", 1)[1]
        for part in ("forward", "backward", "optimizer"):
            child = by_name[f"step {i}/{part}"]
            assert by_name[name]["peak_bytes"] >= child["peak_bytes"], (name, part)
    opt_range = by_name[data["nvtx"][1]]
    opt_phase = by_name["step 1/optimizer"]
    assert opt_range["peak_bytes"] >= opt_phase["peak_bytes"]
