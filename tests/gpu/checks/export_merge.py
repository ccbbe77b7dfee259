# The memory_viz export of a real run read by PyTorch's own helpers, and
# `memguard merge` over the per-rank reports of a DDP run under torchrun. Exec'd by acceptance.py
# (check, workload, train_run, reports, Skip, ctx are its names). The per-phase incremental-peak
# checks are in phases.py.

_MEMVIZ_LOADER = r"""
import json, pickle, sys
import torch
import torch.cuda._memory_viz as mv
path = sys.argv[1]
data = open(path, "rb").read()
snap = pickle.loads(data)
out = {"torch": torch.__version__, "protocol": data[1], "segments": len(snap["segments"]),
       "entries": [len(t) for t in snap["device_traces"]], "actions": {}, "python_frames": 0, "sample": None}
for t in snap["device_traces"]:
    for e in t:
        out["actions"][e["action"]] = out["actions"].get(e["action"], 0) + 1
        if any(f["filename"].endswith(".py") for f in e["frames"]):
            out["python_frames"] += 1
            if out["sample"] is None:
                out["sample"] = [f["name"] + " (" + f["filename"].rsplit("/", 1)[-1] + ":" + str(f["line"]) + ")"
                                 for f in e["frames"]][:12]
text = mv.trace(snap)
out["trace_lines"] = text.count("\n")
out["segsum_first"] = mv.segsum(snap).splitlines()[-3:]
flame = lambda lines: lines
out["segments_lines"] = mv.segments(snap, format_flamegraph=flame).count("\n")
out["memory_lines"] = mv.memory(snap, format_flamegraph=flame).count("\n")
out["trace_plot_chars"] = len(mv.trace_plot(snap))
out["segment_plot_chars"] = len(mv.segment_plot(snap)) if hasattr(mv, "segment_plot") else None
print(json.dumps(out))
"""


@check("export-merge", "memory_viz export of a real training run loads with torch.cuda._memory_viz")
def memviz_real_run(ctx):
    train_run(ctx, "preload", True)
    report = reports(ctx, "train_small_preload.")[0]
    out = ctx.out / "train_small_preload.memviz.pickle"
    p = ctx.run([str(ctx.cli), "export", "--memory-viz", str(report), "-o", str(out)])
    print(p.stdout.strip())
    loader = ctx.out / "memviz_loader.py"
    loader.write_text(_MEMVIZ_LOADER)
    seen = json.loads(ctx.run([ctx.python, str(loader), str(out)]).stdout.strip().splitlines()[-1])
    for k in ("torch", "protocol", "segments", "entries", "actions", "python_frames", "trace_lines",
              "segments_lines", "memory_lines", "trace_plot_chars", "segment_plot_chars", "segsum_first"):
        print(f"{k}: {seen[k]}")
    print("a trace entry's frames (innermost first):")
    for f in seen["sample"] or []:
        print("   ", f)
    summary = json.loads(ctx.run([str(ctx.cli), "summary", "--json", str(report)]).stdout)
    allocs, frees, _ = parse_report(report)
    gpu = {"device", "async", "managed"}
    a_gpu = sum(1 for a in allocs if a[5] in gpu)
    live_blocks = sum(v["live_blocks_at_exit"] for k, v in summary["by_kind"].items() if k in gpu)
    print(f"report: {a_gpu} GPU allocations, {len(frees)} frees, {live_blocks} GPU blocks live at exit")
    assert seen["protocol"] <= 4, seen["protocol"]
    assert seen["actions"].get("alloc", 0) == a_gpu and seen["actions"].get("segment_alloc", 0) == a_gpu, seen
    assert seen["actions"].get("free_completed", 0) == seen["actions"].get("segment_free", 0), seen
    assert seen["segments"] == live_blocks, (seen["segments"], live_blocks)
    assert seen["python_frames"] > 0, "no trace entry carries a Python frame"
    assert seen["trace_plot_chars"] > 1000


def _gpu_count(ctx):
    p = ctx.run([ctx.python, "-c", "import torch; print(torch.cuda.device_count())"])
    return int(p.stdout.strip().splitlines()[-1])


@check("export-merge", "DDP under torchrun: one report per rank, memguard merge shows one row per rank")
def ddp_merge(ctx):
    if _gpu_count(ctx) < 2:
        raise Skip("needs 2 GPUs")
    prefix = ctx.out / "ddp_small"
    template = str(ctx.out / "ddp.%r.%p.mgr")
    p = ctx.run([ctx.python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                 str(HERE / "workloads" / "ddp_small.py"), str(prefix)],
                env={"MEMGUARD_OUTPUT": template}, preload=True, timeout=580)
    results = {r["rank"]: r for r in (json.loads((ctx.out / f"ddp_small.{i}.json").read_text()) for i in (0, 1))}
    files = sorted(ctx.out.glob("ddp.*.mgr"))
    print("reports:", [f.name for f in files])
    text = ctx.run([str(ctx.cli), "merge", "--template", template]).stdout
    print(text)
    merged = json.loads(ctx.run([str(ctx.cli), "merge", "--json", "--template", template]).stdout)
    for r in merged["ranks"]:
        res = results[int(r["rank"])]
        print(f"rank {r['rank']}: memguard peak {r['peak_bytes']}, torch max_allocated {res['max_allocated']}, "
              f"max_reserved {res['max_reserved']}, pid {res['pid']}, file {r['file']}")
    assert len(files) == 2, files
    assert sorted(r["rank"] for r in merged["ranks"]) == ["0", "1"], merged["ranks"]
    for r in merged["ranks"]:
        res = results[int(r["rank"])]
        assert f".{res['pid']}." in r["file"], (r["file"], res["pid"])
        # Every byte PyTorch's allocator handed out lies in memory memguard saw allocated.
        assert r["peak_bytes"] >= res["max_allocated"], (r, res)
    assert merged["max"]["peak_bytes"] == max(r["peak_bytes"] for r in merged["ranks"])
    assert merged["sum"]["peak_bytes"] == sum(r["peak_bytes"] for r in merged["ranks"])
    assert p.returncode == 0
