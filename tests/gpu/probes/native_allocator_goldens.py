"""What PyTorch's own CUDA caching allocator answers through every Python-level memory API, written
as goldens for allocator mode (the CPU tests compare memguard's answers with these keys, formats and
wordings). Runs without memguard, once per setting:

    python3 tests/gpu/probes/native_allocator_goldens.py OUTDIR [--expandable]

Writes OUTDIR/{stats.json, nested_keys.json, summary.txt, snapshot.pickle, snapshot_history.pickle,
dump.pickle, oom.json, fraction.json, settings.json, apis.json}. Nothing here asserts: it records.
"""
import json
import os
import pickle
import sys
import traceback

import torch


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    dev = torch.device("cuda", 0)
    rec = {"torch": torch.__version__, "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}

    def save(name, obj):
        with open(os.path.join(out, name), "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True, default=repr)

    # A small workload: small and large pool blocks, a split, a free, a second stream.
    keep = [torch.empty(n, dtype=torch.uint8, device=dev) for n in (512, 4096, 1 << 20, 3 << 20, 25 << 20)]
    tmp = torch.empty(8 << 20, dtype=torch.uint8, device=dev)
    del tmp
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        on_s = torch.empty(2 << 20, dtype=torch.uint8, device=dev)
    on_s.record_stream(torch.cuda.current_stream())
    del on_s
    torch.cuda.synchronize()

    save("stats.json", torch.cuda.memory_stats(dev))
    nested = torch.cuda.memory_stats_as_nested_dict(dev)
    save("nested_keys.json", {k: sorted(v) if isinstance(v, dict) else type(v).__name__ for k, v in nested.items()})
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(torch.cuda.memory_summary(dev))
    snap = torch.cuda.memory._snapshot()
    with open(os.path.join(out, "snapshot.pickle"), "wb") as f:
        pickle.dump(snap, f)
    ms = torch.cuda.memory_snapshot()
    rec["memory_snapshot_type"] = type(ms).__name__
    rec["memory_snapshot_len"] = len(ms)

    # Memory history: traces with frames, then a dump.
    torch.cuda.memory._record_memory_history(max_entries=1000)
    a = torch.empty(6 << 20, dtype=torch.uint8, device=dev)
    b = torch.empty(300, dtype=torch.uint8, device=dev)
    del a
    torch.cuda.empty_cache()
    snap_h = torch.cuda.memory._snapshot()
    with open(os.path.join(out, "snapshot_history.pickle"), "wb") as f:
        pickle.dump(snap_h, f)
    torch.cuda.memory._dump_snapshot(os.path.join(out, "dump.pickle"))
    torch.cuda.memory._record_memory_history(enabled=None)
    del b

    # Resets.
    torch.cuda.reset_peak_memory_stats(dev)
    save("stats_after_reset_peak.json", torch.cuda.memory_stats(dev))
    torch.cuda.reset_accumulated_memory_stats(dev)
    save("stats_after_reset_accumulated.json", torch.cuda.memory_stats(dev))

    # Memory fraction.
    fr = {}
    fr["get_before"] = torch.cuda.get_per_process_memory_fraction(dev) if hasattr(
        torch.cuda, "get_per_process_memory_fraction") else "absent"
    torch.cuda.set_per_process_memory_fraction(0.05, dev)
    fr["get_after"] = torch.cuda.get_per_process_memory_fraction(dev) if hasattr(
        torch.cuda, "get_per_process_memory_fraction") else "absent"
    try:
        torch.empty(20 << 30, dtype=torch.uint8, device=dev)
    except torch.cuda.OutOfMemoryError as e:
        fr["oom_message"] = str(e)
    torch.cuda.set_per_process_memory_fraction(1.0, dev)
    save("fraction.json", fr)

    # OOM: the observer's arguments and the message.
    seen = []
    torch._C._cuda_attach_out_of_memory_observer(lambda *args: seen.append(args))
    oom = {}
    try:
        torch.empty(1 << 50, dtype=torch.uint8, device=dev)
    except torch.cuda.OutOfMemoryError as e:
        oom["message"] = str(e)
        oom["type"] = type(e).__module__ + "." + type(e).__qualname__
    oom["observer_calls"] = seen
    oom["stats_num_ooms"] = torch.cuda.memory_stats(dev).get("num_ooms")
    save("oom.json", oom)

    # caching_allocator_alloc / delete.
    ca = {}
    p = torch.cuda.caching_allocator_alloc(4096, dev.index, torch.cuda.current_stream())
    ca["ptr_is_int"] = isinstance(p, int)
    ca["allocated_after_alloc"] = torch.cuda.memory_allocated(dev)
    torch.cuda.caching_allocator_delete(p)
    ca["allocated_after_delete"] = torch.cuda.memory_allocated(dev)
    save("caching_allocator.json", ca)

    # Allocator settings.
    st = {}
    for setting in ("max_split_size_mb:256", "garbage_collection_threshold:0.8",
                    "roundup_power2_divisions:4", "expandable_segments:False", "nonsense_key:1"):
        try:
            torch.cuda.memory._set_allocator_settings(setting)
            st[setting] = "ok"
        except Exception as e:  # noqa: BLE001 - recorded, not judged
            st[setting] = f"{type(e).__name__}: {e}"
    save("settings.json", st)

    # Which APIs exist in this release.
    names = ["memory_stats", "memory_stats_as_nested_dict", "memory_summary", "memory_snapshot",
             "reset_peak_memory_stats", "reset_accumulated_memory_stats", "reset_max_memory_allocated",
             "reset_max_memory_cached", "max_memory_allocated", "max_memory_reserved", "memory_allocated",
             "memory_reserved", "get_per_process_memory_fraction", "set_per_process_memory_fraction",
             "caching_allocator_alloc", "caching_allocator_delete", "list_gpu_processes", "mem_get_info",
             "get_allocator_backend", "host_memory_stats"]
    rec["torch.cuda"] = {n: hasattr(torch.cuda, n) for n in names}
    rec["torch._C"] = sorted(n for n in dir(torch._C) if n.startswith("_cuda_") and (
        "emory" in n or "llocator" in n or "napshot" in n or "bserver" in n or "ool" in n or "istory" in n))
    rec["allocator_backend"] = torch.cuda.get_allocator_backend()
    save("apis.json", rec)
    print("goldens written to", out)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
