"""Snapshots and memory history for the GPU acceptance suite: run once with
MEMGUARD_ALLOCATOR=memguard and once with PyTorch's allocator, compared by
tests/gpu/checks/allocator_mode.py (alloc_mode_snapshot).

usage: allocator_snapshot.py RESULT.json

Allocates known tensors with torch.empty (no kernels, so no library allocates on its own), takes
torch.cuda.memory._snapshot() without history, then records a history
(_record_memory_history(max_entries=10000)), allocates and frees more, _dump_snapshot()s it and
loads the dump with torch.cuda._memory_viz. Writes the key sets, the allocated blocks' sizes, the
trace's actions and whether the allocating line of this file appears in the frames.
"""
import inspect
import json
import os
import pickle
import sys

import torch
import torch.cuda._memory_viz as mv

MIB = 1 << 20


def keys(dicts):
    out = set()
    for d in dicts:
        out.update(d)
    return sorted(out)


def allocate_here(n):
    return torch.empty(n, dtype=torch.uint8, device="cuda")  # ALLOCATING LINE


ALLOC_LINE = next(i for i, line in enumerate(inspect.getsource(sys.modules[__name__]).splitlines(), 1)
                  if line.rstrip().endswith("# ALLOCATING LINE") and "ALLOC_LINE" not in line)
HERE = os.path.abspath(__file__)


def describe(snap):
    segs = snap["segments"]
    blocks = [b for s in segs for b in s["blocks"]]
    traces = snap["device_traces"]
    entries = [e for t in traces for e in t]
    frames = [f for b in blocks for f in b["frames"]] + [f for e in entries for f in e.get("frames", [])]
    by_action = {}
    for e in entries:
        by_action.setdefault(e["action"], set()).update(e)
    return {
        "top_keys": sorted(snap),
        "segment_keys": keys(segs),
        "block_keys": keys(blocks),
        "frame_keys": keys(frames),
        "trace_keys": {a: sorted(k) for a, k in by_action.items()},
        "settings_keys": sorted(snap.get("allocator_settings", {})),
        "allocated_sizes": sorted(b["size"] for b in blocks if b["state"] == "active_allocated"),
        "requested_sizes": sorted(b["requested_size"] for b in blocks if b["state"] == "active_allocated"),
        "segment_types": sorted(s["segment_type"] for s in segs),
        "expandable": sorted({s["is_expandable"] for s in segs}),
        "actions": [e["action"] for e in entries],
        "devices": len(traces),
    }


def on_line(frames):
    return any(os.path.abspath(f["filename"]) == HERE and f["line"] == ALLOC_LINE for f in frames)


def main():
    out_path = sys.argv[1]
    result = {"backend": torch.cuda.memory.get_allocator_backend(), "torch": torch.__version__,
              "alloc_line": ALLOC_LINE}
    torch.cuda.init()
    kept = [allocate_here(n) for n in (1000, 3 * MIB, 25 * MIB)]
    torch.cuda.synchronize()
    result["plain"] = describe(torch.cuda.memory._snapshot())
    result["memory_snapshot_len"] = len(torch.cuda.memory_snapshot())

    torch.cuda.memory._record_memory_history(max_entries=10000)
    # 5 MiB fits the 3 MiB block's 20 MiB segment; 30 MiB needs a segment of its own (segment_alloc).
    # The entries recorded meanwhile carry _set_memory_metadata's text (where this PyTorch has it).
    set_md = getattr(torch.cuda.memory, "_set_memory_metadata", None)
    if set_md:
        set_md("mg-metadata")
    more = [allocate_here(n) for n in (5 * MIB, 30 * MIB, 700)]
    if set_md:
        result["metadata_read_back"] = torch.cuda.memory._get_memory_metadata()
        set_md("")
    result["history_allocations"] = len(more)
    del kept[1]  # a 3 MiB block: free_requested / free_completed
    dump = os.path.splitext(os.path.abspath(out_path))[0] + ".pickle"
    result["conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    torch.cuda.memory._dump_snapshot(dump)
    torch.cuda.memory._record_memory_history(None)
    with open(dump, "rb") as f:
        snap = pickle.load(f)
    result["history"] = describe(snap)
    allocs = [e for t in snap["device_traces"] for e in t if e["action"] == "alloc"]
    result["alloc_entries_on_line"] = sum(1 for e in allocs if on_line(e.get("frames", [])))
    result["alloc_entries"] = len(allocs)
    result["alloc_metadata"] = [e.get("user_metadata") for e in allocs]
    live = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
    result["live_blocks_on_line"] = sum(1 for b in live if on_line(b["frames"]))
    sample = next((e for e in allocs if on_line(e.get("frames", []))), None)
    result["sample_frames"] = [f"{f['name']} {os.path.basename(f['filename'])}:{f['line']}"
                               for f in (sample or {}).get("frames", [])][:12]
    html_t = mv.trace_plot(snap)
    html_s = mv.segment_plot(snap)
    result["trace_plot_html"] = [len(html_t), "<html" in html_t.lower() or "<!doctype" in html_t.lower()]
    result["segment_plot_html"] = [len(html_s), "<html" in html_s.lower() or "<!doctype" in html_s.lower()]
    result["memory_lines_with_line"] = sum(1 for line in mv.memory(snap, format_flamegraph=lambda s: s).splitlines()
                                           if "allocate_here" in line)
    del more, kept
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
