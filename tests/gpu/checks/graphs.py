# CUDA graphs: capture-pool ownership (torch.cuda.graph, make_graphed_callables, reduce-overhead),
# graph destruction and the warm-up retention hazard. Exec'd by acceptance.py (check, workload,
# records, cli_print, reports, ctx are its names).


def graphs_run(ctx, tag, preload):
    return workload(ctx, "graphs", tag, preload)


def graphs_report(ctx):
    files = reports(ctx, "graphs_preload.")
    # torch.compile's workers are separate processes that allocate nothing: one report.
    assert len(files) == 1, files
    return files[0]


@check("graphs", "torch.cuda.graph, make_graphed_callables, reduce-overhead: results identical with and without")
def graphs_identical(ctx):
    with_lib = graphs_run(ctx, "preload", preload=True)
    without = graphs_run(ctx, "plain", preload=False)
    for key in ("graph_sums", "graphed_callables_sums", "reduce_overhead_sums"):
        print(key, "with:", with_lib[key][:3], "...")
        assert with_lib[key] == without[key], (key, with_lib[key], without[key])


@check("graphs", "private-pool segments attributed to their captures and graphs; graph destruction recorded")
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


@check("graphs", "a deliberately retained warm-up output shows in the warm-up retention view")
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
