# Allocator mode: memguard as PyTorch's caching allocator (MEMGUARD_ALLOCATOR=memguard). Exec'd by
# acceptance.py (check, workload, Skip, ctx are its names). Every scenario of
# tests/gpu/workloads/allocator_mode.py runs under LD_PRELOAD twice: with MEMGUARD_ALLOCATOR=memguard
# and with PyTorch's own allocator; the checks compare, read the report's T/t/A/F/O/o records
# (docs/report-format.md, minor 5) themselves, and print what they saw.

MEMGUARD_MODE = {"MEMGUARD_ALLOCATOR": "memguard"}
NATIVE_MODE = {"MEMGUARD_ALLOCATOR": "native"}


def _alloc_pair(ctx, scenario, args=()):
    mg = workload(ctx, "allocator_mode", scenario + "_memguard", True, env=MEMGUARD_MODE, args=(scenario, *args))
    nat = workload(ctx, "allocator_mode", scenario + "_native", True, env=NATIVE_MODE, args=(scenario, *args))
    print(f"{scenario}: backend with MEMGUARD_ALLOCATOR=memguard: {mg['backend']}, without: {nat['backend']} "
          f"(torch {mg['torch']})")
    assert mg["backend"] == "pluggable", "memguard did not install itself\n" + mg["stderr"][-3000:]
    # The pool hooks take std::pair/std::function: libmemguard.so is built with the cxx11 ABI.
    assert mg["cxx11_abi"], "torch was built with the old libstdc++ ABI"
    assert nat["backend"] == "native", nat["backend"]
    return mg, nat


def _records(path, types, upto=None):
    with open(path, "rb") as f:
        data = f.read() if upto is None else f.read(upto)
    out = []
    for raw in data.decode(errors="replace").splitlines():
        r = raw.split()
        if r and r[0] in types and len(r[0]) == 1:
            out.append(r)
    return out


def _report_of(ctx, tag):
    files = sorted(ctx.out.glob(f"allocator_mode_{tag}.*.mgr"))
    assert len(files) == 1, files
    return files[0]


@check("allocator-mode", "allocator mode: 50 training steps, losses bitwise equal to PyTorch's allocator")
def alloc_mode_train(ctx):
    mg, nat = _alloc_pair(ctx, "train", ("--steps", "50"))
    print("memguard losses (first 3, last):", mg["losses"][:3], mg["losses"][-1])
    print("native   losses (first 3, last):", nat["losses"][:3], nat["losses"][-1])
    print(f"max_memory_allocated memguard {mg['max_memory_allocated']} native {nat['max_memory_allocated']}; "
          f"max_memory_reserved memguard {mg['max_memory_reserved']} native {nat['max_memory_reserved']}")
    assert len(mg["losses"]) == 50
    assert mg["losses"] == nat["losses"]
    path = _report_of(ctx, "train_memguard")
    info = {r[1]: r[2] for r in _records(path, "I")}
    blocks = _records(path, "T")
    with_py = sum(1 for r in blocks if r[9] != "0")
    print(f"report {path.name}: I allocator={info.get('allocator')}, T records {len(blocks)} "
          f"({with_py} with a Python stack), t records {len(_records(path, 't'))}")
    assert info.get("allocator") == "memguard"
    assert len(blocks) > 50 and with_py > 0


@check("allocator-mode", "allocator mode: CUDA graph capture/replay, two graphs sharing a pool, make_graphed_callables")
def alloc_mode_graphs(ctx):
    mg, nat = _alloc_pair(ctx, "graphs")
    print("replays memguard:", mg["replays"][0], "... native:", nat["replays"][0])
    print("graphed grads memguard:", mg["graphed_grads"], "native:", nat["graphed_grads"])
    print(f"reserved after the graphs were released and the cache emptied: memguard "
          f"{mg['reserved_after_release']} native {nat['reserved_after_release']}")
    assert mg["replays"] == nat["replays"]
    assert mg["graphed_grads"] == nat["graphed_grads"]
    path = _report_of(ctx, "graphs_memguard")
    captures = _records(path, "C")
    pooled = [r for r in _records(path, "T") if r[11] != "-"]
    owners = sorted({r[10] for r in pooled})
    pools = sorted({r[11] for r in pooled})
    unsafe = [r for r in _records(path, "W") if r[3] == "unsafe_call"]
    print(f"captures {len(captures)}; T records from private pools {len(pooled)}, pools {pools}, "
          f"capture owners {owners}; unsafe calls during captures: {len(unsafe)}")
    assert len(captures) >= 2 and pooled
    assert "0" not in owners, "every private-pool block names its capture"
    assert not unsafe


@check("allocator-mode", "allocator mode: torch.compile default mode, losses equal to PyTorch's allocator")
def alloc_mode_compile(ctx):
    mg, nat = _alloc_pair(ctx, "compile", ("--steps", "10"))
    print("memguard:", mg["losses"])
    print("native:  ", nat["losses"])
    assert mg["losses"] == nat["losses"]


@check("allocator-mode", "allocator mode: torch.cuda memory statistics answer from memguard and match the report")
def alloc_mode_stats(ctx):
    mg, nat = _alloc_pair(ctx, "stats")
    for k in ("base", "after", "peak_after", "after_free", "peak_kept", "peak_reset", "reserved_after_empty"):
        print(f"{k:22s} memguard {mg[k]:>12} native {nat[k]:>12}")
    print("memory_stats memguard:", mg["stats"])
    print("memory_stats native:  ", nat["stats"])
    ten = 10 * 1024 * 1024
    assert mg["after"] - mg["base"] == ten + 1024, "a 10 MiB and a 1000-byte tensor (rounded to 1024)"
    assert mg["after"] - mg["base"] == nat["after"] - nat["base"]
    assert mg["after_free"] == mg["after"] - ten and mg["peak_kept"] == mg["peak_after"]
    assert mg["peak_reset"] == mg["after_free"]
    assert mg["stats"]["num_device_alloc"] >= 2 and mg["stats"]["num_ooms"] == 0
    assert all(v is not None for v in mg["stats"].values()), mg["stats"]
    # The report up to the flushed point: live T bytes = memory_allocated, live segments = reserved.
    upto = mg["report_size"]
    live_t, live_a = {}, {}
    for r in _records(mg["report"], "TtAF", upto):
        if r[0] == "T":
            live_t[r[3]] = int(r[4])
        elif r[0] == "t":
            live_t.pop(r[3], None)
        elif r[0] == "A" and r[6] == "cudaMalloc":
            live_a[r[3]] = int(r[4])
        elif r[0] == "F":
            live_a.pop(r[3], None)
    print(f"at the flushed point: report T live {sum(live_t.values())}, memory_allocated "
          f"{mg['at_flush']['allocated']}; report segments {sum(live_a.values())}, memory_reserved "
          f"{mg['at_flush']['reserved']}")
    assert sum(live_t.values()) == mg["at_flush"]["allocated"]
    assert sum(live_a.values()) == mg["at_flush"]["reserved"]


@check("allocator-mode", "allocator mode: cycles holding CUDA tensors: native raises OutOfMemoryError, memguard's rescue avoids it; "
          "a hopeless allocation raises torch.cuda.OutOfMemoryError in both")
def alloc_mode_oom(ctx):
    mg, nat = _alloc_pair(ctx, "oom")
    print(f"native:   {nat['done']}/{nat['iterations']} iterations, error {nat['error']}")
    print(f"memguard: {mg['done']}/{mg['iterations']} iterations, error {mg['error']}")
    print(f"a 4 GiB allocation over the 2 GiB fraction: native {nat['hopeless']}; memguard {mg['hopeless']}; "
          f"afterwards the GPU still works: {mg['still_works']}")
    assert nat["error"] and nat["error"][0] == "OutOfMemoryError"
    assert mg["error"] is None and mg["done"] == mg["iterations"]
    assert mg["hopeless"] is not None and "out of memory" in mg["hopeless"][1].lower()
    # What training scripts catch: memguard throws c10::OutOfMemoryError built by libc10's own
    # constructor (src/interpose/torch_error.cpp), which PyTorch's binding raises as this type.
    print(f"exception type of the failed 4 GiB allocation: native {nat['hopeless'][2]} "
          f"(torch.cuda.OutOfMemoryError: {nat['hopeless'][3]}); memguard {mg['hopeless'][2]} "
          f"(torch.cuda.OutOfMemoryError: {mg['hopeless'][3]})")
    assert nat["hopeless"][3], "native allocator's reference type"
    assert mg["hopeless"][3] and mg["hopeless"][0] == "OutOfMemoryError", mg["hopeless"]
    assert mg["still_works"] == 1024.0
    path = _report_of(ctx, "oom_memguard")
    ooms = _records(path, "O")
    sites = _records(path, "o")
    ys = _records(path, "Y")
    gc_freed = sum(1 for r in _records(path, "t") if r[4] == "1")
    print(f"report: O records {[(r[4], r[11]) for r in ooms]}, o records {len(sites)}, "
          f"blocks freed during collections {gc_freed}, collections {len(ys)}")
    assert ooms and ooms[-1][11] == "gc", "the final failure tried the cache and a collection"
    assert gc_freed >= mg["iterations"] // 8


@check("allocator-mode", "allocator mode by hand: CUDAPluggableAllocator(libmemguard.so, memguard_alloc, memguard_free), no LD_PRELOAD")
def alloc_mode_by_hand(ctx):
    mg = workload(ctx, "allocator_mode", "byhand_memguard", False, args=("byhand", "--lib", str(ctx.lib)))
    nat = workload(ctx, "allocator_mode", "byhand_native", False, args=("byhand",))
    print(f"by hand: backend {mg['backend']}, result {mg['result']}; native: backend {nat['backend']}, "
          f"result {nat['result']}")
    assert mg["backend"] == "pluggable" and nat["backend"] == "native"
    assert mg["result"] == nat["result"]


# PyTorch's OOM message (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator::malloc) with its
# figures as wildcards; memguard's own detail may follow on the next line.
_SIZE = r"\d+(?:\.\d\d (?:KiB|MiB|GiB)| bytes)"
_TORCH_OOM = (r"^CUDA out of memory\. Tried to allocate (?P<alloc>" + _SIZE + r")\. GPU (?P<device>\d+) has a total "
              r"capacity of (?P<total>" + _SIZE + r") of which (?P<free>" + _SIZE + r") is free\. "
              r"(?P<procs>(?:(?:Including non-PyTorch memory, this process|Process \d+) has " + _SIZE +
              r" memory in use\. )*)(?:(?P<allowed>" + _SIZE + r") allowed; )?Of the allocated memory (?P<allocated>" +
              _SIZE + r") is allocated by PyTorch, (?:with " + _SIZE + r" allocated in private pools \(e\.g\., CUDA "
              r"Graphs\), )?and (?P<unallocated>" + _SIZE + r") is reserved by PyTorch but unallocated\. If reserved "
              r"but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
              r"fragmentation\.  See documentation for Memory Management  \((?P<url>https://[^)]+)\)")


@check("allocator-mode", "allocator mode: every torch.cuda memory API answers as PyTorch's allocator does "
                         "(stats keys and values, summary, resets, fraction, caching_allocator_alloc, settings, "
                         "OOM observers and message)")
def alloc_mode_memory_api(ctx):
    import re
    mg = workload(ctx, "memory_api", "memguard", True, env=MEMGUARD_MODE)
    nat = workload(ctx, "memory_api", "native", True, env=NATIVE_MODE)
    print(f"backend with MEMGUARD_ALLOCATOR=memguard: {mg['backend']}, without: {nat['backend']} (torch {mg['torch']})")
    assert mg["backend"] == "pluggable" and nat["backend"] == "native"
    rows, bad = [], []

    def row(api, native, memguard, ok, why=""):
        rows.append((api, native, memguard, "ok" if ok else "DIFFERS", why))
        if not ok:
            bad.append(api)

    def short(v, n=60):
        s = json.dumps(v) if not isinstance(v, str) else v
        return s if len(s) <= n else s[:n - 3] + "..."

    # Entry points that raised in one mode only.
    for name in sorted(set(mg["errors"]) | set(nat["errors"])):
        row(f"raised: {name}", nat["errors"].get(name, "-"), mg["errors"].get(name, "-"),
            name in nat["errors"] and name in mg["errors"])
    sm, sn = mg["stats"] or {}, nat["stats"] or {}
    row("memory_stats keys", f"{len(sn)} keys", f"{len(sm)} keys", sorted(sm) == sorted(sn),
        f"only native: {sorted(set(sn) - set(sm))}, only memguard: {sorted(set(sm) - set(sn))}")
    row("memory_stats_as_nested_dict keys", short(sorted(nat["nested_keys"] or {})),
        short(sorted(mg["nested_keys"] or {})), mg["nested_keys"] == nat["nested_keys"])
    # Where the two allocators must agree: what the program allocated and asked for.
    must = [k for k in sn if k.split(".")[0] in ("allocation", "allocated_bytes", "requested_bytes")]
    differ = {k: (sn[k], sm.get(k)) for k in must if sn[k] != sm.get(k)}
    row("allocation / allocated_bytes / requested_bytes (36 values)", "", "", not differ, short(differ, 400))
    for k in ("num_ooms", "num_alloc_retries", "max_split_size", "oversize_allocations.current"):
        row(f"memory_stats[{k}]", sn.get(k), sm.get(k), sn.get(k) == sm.get(k))
    # Everything else, for the record (memguard's rules are PyTorch's; not asserted).
    others = {k: (sn[k], sm.get(k)) for k in sn if k not in must and sn[k] != sm.get(k)}
    rows.append(("all other memory_stats values (informational)", f"{len(sn) - len(must)} values",
                 f"{len(others)} differ", "info", short(others, 400)))
    # Where they may differ: sane values.
    sane = (sm.get("reserved_bytes.all.current", -1) >= sm.get("allocated_bytes.all.current", 0)
            and sm.get("segment.all.current", 0) >= 1
            and sm.get("inactive_split_bytes.all.current", -1) <= sm["reserved_bytes.all.current"]
            - sm["allocated_bytes.all.current"]
            and sm.get("active_bytes.all.current", -1) >= sm["allocated_bytes.all.current"]
            and sm.get("num_device_alloc", 0) >= sm.get("segment.all.current", 0))
    row("reserved / segments / splits / active (sane)",
        f"reserved {sn.get('reserved_bytes.all.current')} segs {sn.get('segment.all.current')}",
        f"reserved {sm.get('reserved_bytes.all.current')} segs {sm.get('segment.all.current')}", sane)
    row("memory_allocated / max_memory_allocated", short([nat["family"]["memory_allocated"],
                                                          nat["family"]["max_memory_allocated"]]),
        short([mg["family"]["memory_allocated"], mg["family"]["max_memory_allocated"]]),
        [mg["family"][k] for k in ("memory_allocated", "max_memory_allocated")]
        == [nat["family"][k] for k in ("memory_allocated", "max_memory_allocated")])
    if "accelerator_stats" in nat or "accelerator_stats" in mg:
        row("torch.accelerator.memory_stats keys", len(nat.get("accelerator_stats") or {}),
            len(mg.get("accelerator_stats") or {}),
            sorted(mg.get("accelerator_stats") or {}) == sorted(nat.get("accelerator_stats") or {}))
    summary_ok = bool(mg["summary"]) and "PyTorch CUDA memory summary" in mg["summary"] and bool(mg["summary_end"])
    row("memory_summary prints", len(nat["summary"] or ""), len(mg["summary"] or ""),
        summary_ok and len(mg["summary"].splitlines()) == len(nat["summary"].splitlines()))
    for when in ("after_reset_peak", "after_reset_accumulated"):
        a, b = nat[when] or {}, mg[when] or {}
        keys = [k for k in a if k.split(".")[0] in ("allocation", "allocated_bytes", "requested_bytes")]
        d = {k: (a[k], b.get(k)) for k in keys if a[k] != b.get(k)}
        row(f"memory_stats {when.replace('_', ' ')}", "", "", not d and sorted(a) == sorted(b), short(d, 300))
    row("reset_accumulated: num_device_alloc, num_alloc_retries", short([(nat["after_reset_accumulated"] or {}).get(k)
        for k in ("num_device_alloc", "num_alloc_retries")]), short([(mg["after_reset_accumulated"] or {}).get(k)
        for k in ("num_device_alloc", "num_alloc_retries")]),
        all((mg["after_reset_accumulated"] or {}).get(k) == 0 for k in ("num_device_alloc", "num_alloc_retries")))
    row("get/set_per_process_memory_fraction", short(nat["fraction"]), short(mg["fraction"]),
        mg["fraction"] == nat["fraction"])
    row("caching_allocator_alloc/delete", short(nat["caching_allocator"]), short(mg["caching_allocator"]),
        mg["caching_allocator"] == nat["caching_allocator"] == {"ptr_is_int": True, "allocated_delta": 4096,
                                                                 "after_delete_delta": 0})
    # Settings: the same answers (PyTorch's own parser runs first in both); memguard's
    # max_split_size statistic follows the setting (PyTorch's keeps its start-up value).
    answers_n = [(t, a.split(":")[0]) for t, a, *_ in nat["settings"]]
    answers_m = [(t, a.split(":")[0]) for t, a, *_ in mg["settings"]]
    row("_set_allocator_settings answers", short(answers_n, 80), short(answers_m, 80), answers_n == answers_m)
    mg_split = {t: v for t, _, v, *_ in mg["settings"]}
    row("_set_allocator_settings applied (memguard's max_split_size)", short([v for _, _, v, *_ in nat["settings"]]),
        short([v for _, _, v, *_ in mg["settings"]]), mg_split.get("max_split_size_mb:256") == 256 * 1024 * 1024
        and mg_split.get("garbage_collection_threshold:0.8") == -1)
    row("garbage_collection_threshold: segments freed, large pool MiB after", nat.get("gc_threshold"),
        mg.get("gc_threshold"), mg.get("gc_threshold") is not None and mg.get("gc_threshold") == nat.get("gc_threshold"))
    on, om = nat["oom"], mg["oom"]
    row("OutOfMemoryError type", on.get("is_torch_oom"), om.get("is_torch_oom"),
        om.get("is_torch_oom") is True and om.get("fraction_is_torch_oom") is True)
    mn = re.match(_TORCH_OOM, on.get("message", ""))
    mm = re.match(_TORCH_OOM, om.get("message", ""))
    row("OOM message: PyTorch's wording (native matches the pattern too)", bool(mn), bool(mm), bool(mn and mm),
        "" if mm else om.get("message", "")[:600])
    if mn and mm:
        for g in ("alloc", "device", "total", "url"):
            row(f"OOM message {g}", mn.group(g), mm.group(g), mn.group(g) == mm.group(g))
        row("OOM message names this process", short(mn.group("procs")), short(mm.group("procs")),
            ("this process" in mm.group("procs")) == ("this process" in mn.group("procs")))
    fn_ = re.match(_TORCH_OOM, on.get("fraction_message", ""))
    fm_ = re.match(_TORCH_OOM, om.get("fraction_message", ""))
    row("OOM over the fraction: 'allowed' sentence", fn_ and fn_.group("allowed"), fm_ and fm_.group("allowed"),
        bool(fn_ and fm_) and fn_.group("allowed") == fm_.group("allowed"),
        "" if fm_ else om.get("fraction_message", "")[:600])
    # Observers: device, the allocation tried, the limit or total, free bytes (free may differ).
    cn, cm = on.get("observer_calls", []), om.get("observer_calls", [])
    row("OOM observer called (device, alloc, total)", short(cn), short(cm),
        len(cm) == len(cn) == 1 and cm[0][:3] == cn[0][:3])
    fcn, fcm = on.get("fraction_observer_calls", []), om.get("fraction_observer_calls", [])
    row("OOM observer over the fraction (device, alloc, limit)", short(fcn), short(fcm),
        len(fcm) == len(fcn) == 1 and fcm[0][:3] == fcn[0][:3])
    row("num_ooms after both", on.get("num_ooms"), om.get("num_ooms"), on.get("num_ooms") == om.get("num_ooms"))
    row("GPU still works after the OOMs", nat["still_works"], mg["still_works"], mg["still_works"] == 1024.0)

    print("\n| API | native | memguard | verdict | detail |\n|---|---|---|---|---|")
    for api, n, m, verdict, why in rows:
        print(f"| {api} | {short(n)} | {short(m)} | {verdict} | {why if verdict not in ('ok',) else ''} |")
    print("\nnative OOM message:  ", on.get("message", "")[:700])
    print("memguard OOM message:", om.get("message", "")[:900])
    print("native summary:\n" + (nat["summary"] or "")[:1500])
    print("memguard summary:\n" + (mg["summary"] or "")[:1500])
    assert not bad, f"differs from PyTorch's allocator: {bad}"


@check("allocator-mode", "allocator mode: _snapshot keys and allocated blocks equal PyTorch's (with and without "
                         "expandable segments); _record_memory_history + _dump_snapshot load in torch.cuda._memory_viz")
def alloc_mode_snapshot(ctx):
    for conf in ("", "expandable_segments:True"):
        print(f"--- PYTORCH_CUDA_ALLOC_CONF={conf!r}")
        _snapshot_pair(ctx, conf)


def _snapshot_pair(ctx, conf):
    suffix = "_expandable" if conf else ""
    env = {"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else {}
    mg = workload(ctx, "allocator_snapshot", "memguard" + suffix, True, env=dict(MEMGUARD_MODE, **env))
    nat = workload(ctx, "allocator_snapshot", "native" + suffix, True, env=dict(NATIVE_MODE, **env))
    print(f"backend memguard {mg['backend']}, native {nat['backend']} (torch {mg['torch']})")
    assert mg["backend"] == "pluggable" and nat["backend"] == "native"
    for phase in ("plain", "history"):
        m, n = mg[phase], nat[phase]
        for k in ("top_keys", "segment_keys", "block_keys", "frame_keys", "settings_keys"):
            print(f"{phase} {k}: memguard {m[k]}\n{' ' * len(phase)} {' ' * len(k)}  native   {n[k]}")
            assert m[k] == n[k], (phase, k)
        print(f"{phase} allocated block sizes: memguard {m['allocated_sizes']} native {n['allocated_sizes']}")
        print(f"{phase} requested sizes:       memguard {m['requested_sizes']} native {n['requested_sizes']}")
        assert m["allocated_sizes"] == n["allocated_sizes"], phase
        assert m["requested_sizes"] == n["requested_sizes"], phase
        print(f"{phase} segment types: memguard {m['segment_types']} native {n['segment_types']}")
    m, n = mg["history"], nat["history"]
    print("trace actions memguard:", m["actions"])
    print("trace actions native:  ", n["actions"])
    for action, k in n["trace_keys"].items():
        if action in m["trace_keys"]:
            print(f"trace keys of {action}: memguard {m['trace_keys'][action]} native {k}")
            assert m["trace_keys"][action] == k, action
    grow = "segment_map" if conf else "segment_alloc"
    print(f"expandable segments: memguard {mg['history']['expandable']} native {nat['history']['expandable']}")
    assert mg["history"]["expandable"] == nat["history"]["expandable"] == [bool(conf)]
    for a in ("alloc", grow, "free_requested", "free_completed", "snapshot"):
        assert a in m["actions"], a
    assert m["actions"].count("alloc") == n["actions"].count("alloc"), "one alloc entry per tensor in both"
    print(f"alloc entries whose frames name {mg['alloc_line']} of allocator_snapshot.py: memguard "
          f"{mg['alloc_entries_on_line']}/{mg['alloc_entries']} native {nat['alloc_entries_on_line']}/"
          f"{nat['alloc_entries']}; live blocks on that line: memguard {mg['live_blocks_on_line']} native "
          f"{nat['live_blocks_on_line']}")
    print("memguard frames of one alloc entry:", mg["sample_frames"])
    print("native   frames of one alloc entry:", nat["sample_frames"])
    print(f"user_metadata of the alloc entries: memguard {mg['alloc_metadata']} native {nat['alloc_metadata']}; "
          f"read back memguard {mg.get('metadata_read_back')!r} native {nat.get('metadata_read_back')!r}")
    assert mg["alloc_metadata"] == nat["alloc_metadata"]
    assert mg.get("metadata_read_back") == nat.get("metadata_read_back")
    assert mg["alloc_entries_on_line"] == mg["alloc_entries"] == mg["history_allocations"]
    assert mg["live_blocks_on_line"] == mg["history_allocations"]
    print(f"_memory_viz html (bytes, is html): trace_plot memguard {mg['trace_plot_html']} native "
          f"{nat['trace_plot_html']}; segment_plot memguard {mg['segment_plot_html']} native {nat['segment_plot_html']}; "
          f"memory() lines naming allocate_here memguard {mg['memory_lines_with_line']} native "
          f"{nat['memory_lines_with_line']}")
    assert mg["trace_plot_html"][1] and mg["segment_plot_html"][1]
    assert mg["memory_lines_with_line"] >= 2
