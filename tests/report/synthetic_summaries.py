"""Synthetic rank summaries (docs/rank-summary.md, schema version 1) of a data-parallel training job:
what `memguard run` writes beside each rank's report. Used by check_rank_outliers.py (the test) and
bench/merge_outliers.py (the timing).

    write_fleet(directory, ranks=1024, seed=23) -> the ranks planted as outliers

Every rank holds the same parameters, gradients and optimizer state, activations that vary by up to
3% (variable-length batches), NCCL buffers that vary by up to 1% and an allocator cache that varies
by up to 20%, at twelve sites. Three ranks are planted:
  7     NCCL's buffers 8.8 GiB instead of about 1.2 GiB (its ncclCuMemAlloc site too);
  300   6 GiB more activations at one site (forward at model.py:88);
  1000  a site no other rank has: 3 GiB of other tensors kept at train.py:120.
"""
import json
import os
import random

MiB = 1 << 20
GiB = 1 << 30

PLANTED = (7, 300, 1000)


def site(label, user_line, frames, nbytes, blocks=1):
    return {"label": label, "user_line": user_line, "frames": frames, "bytes": int(nbytes), "blocks": blocks}


def py(fn, path, line):
    return f"py {fn} at {path}:{line}"


def summary(rank, categories, sites, peak_time_ns=41_000_000_000, run_id="20261204-120000-0badcafe"):
    """A summary in the tensor view (allocator mode): categories [(name, bytes)], sites as site()."""
    peak = sum(b for _, b in categories)
    sites = sorted(sites, key=lambda s: -s["bytes"])
    return {
        "schema": "memguard.rank_summary",
        "schema_version": 1,
        "report": f"memguard.python3.rank{rank}.{4000 + rank}.mgr",
        "report_bytes": 1234567,
        "complete": True,
        "lost_records": 0,
        "run_id": run_id,
        "rank": rank,
        "host": f"node{rank // 8:03d}",
        "pid": 4000 + rank,
        "exe": "/usr/bin/python3",
        "t0_unix_ns": 1764849600000000000,
        "devices": [rank % 8],
        "duration_ns": 600_000_000_000,
        "allocator_mode": True,
        "peak": {"bytes_of": "tensors", "bytes": peak, "time_ns": peak_time_ns},
        "gpu": {"peak_bytes": peak + 2 * GiB, "peak_time_ns": peak_time_ns, "live_bytes_at_exit": 0},
        "tensors": {"peak_bytes": peak, "peak_time_ns": peak_time_ns, "live_bytes_at_exit": 0},
        "categories_at_peak": [{"name": n, "bytes": int(b), "estimated_bytes": 0}
                               for n, b in sorted(categories, key=lambda c: -c[1])],
        "sites_at_peak": {"count": len(sites) + 40, "cut": False, "top": sites[:12]},
        "ooms": {"count": 0, "recovered": 0, "cuda_oom_errors": 0, "allocator_ooms": 0, "events": []},
        "collections": {"count": 3, "cuda_bytes_freed": 0, "by_trigger": {
            t: {"count": 1 if t in ("automatic", "memguard", "step") else 0, "cuda_bytes_freed": 0}
            for t in ("automatic", "explicit", "memguard", "recompute", "step")}},
        "hazards": {"count": 0, "unsafe_call": 0, "free_live_graph": 0, "warmup_retention": 0},
        "phases": 0,
        "compiles": 1,
        "steps": {"count": 100, "bytes_of": "tensors", "median_duration_ns": 5_000_000_000,
                  "max_duration_ns": 6_000_000_000, "max_peak_bytes": peak,
                  "median_incremental_peak_bytes": 10 * GiB, "last_exit_bytes": 8 * GiB, "growth": None},
    }


def rank_summary(rank, rng):
    def noisy(nbytes, share):
        return int(nbytes * (1 + rng.uniform(-share, share)))

    activations = [noisy(4 * GiB, 0.03), noisy(3 * GiB, 0.03), noisy(2 * GiB, 0.03), noisy(1 * GiB, 0.03)]
    nccl = noisy(1.2 * GiB, 0.01)
    cache = noisy(1 * GiB, 0.2)
    other = noisy(512 * MiB, 0.05)
    sites = [
        site("step at train.py:60 via _single_tensor_adamw", "step at train.py:60",
             [py("_single_tensor_adamw", "torch/optim/adamw.py", 180), py("step", "train.py", 60)], 4 * GiB, 300),
        site("<module> at train.py:14", "<module> at train.py:14", [py("<module>", "train.py", 14)], 2 * GiB, 300),
        site("backward at train.py:58 (attributed)", "backward at train.py:58",
             ["libtorch_cuda.so at::native::empty_cuda"], 2 * GiB, 300),
        site("forward at model.py:41", "forward at model.py:41", [py("forward", "model.py", 41)], activations[0], 40),
        site("forward at model.py:88", "forward at model.py:88", [py("forward", "model.py", 88)], activations[1], 40),
        site("forward at model.py:120", "forward at model.py:120", [py("forward", "model.py", 120)], activations[2], 40),
        site("attention at model.py:200", "attention at model.py:200", [py("attention", "model.py", 200)],
             activations[3], 40),
        site("libnccl.so.2 ncclCuMemAlloc", None, ["libnccl.so.2 ncclCuMemAlloc", "libnccl.so.2 ncclCommInitRank"],
             nccl, 4),
        site("collate at data.py:30", "collate at data.py:30", [py("collate", "data.py", 30)], other, 8),
        site("libcublasLt.so.13 cublasLtMatmul", None, ["libcublasLt.so.13 cublasLtMatmul"], 32 * MiB, 1),
    ]
    categories = [("parameter", 2 * GiB), ("gradient", 2 * GiB), ("optimizer_state", 4 * GiB),
                  ("activation", sum(activations)), ("nccl", nccl), ("allocator_cache", cache),
                  ("other_tensor", other), ("blas_workspace", 32 * MiB)]
    if rank == 7:
        categories = [(n, 8.8 * GiB if n == "nccl" else b) for n, b in categories]
        sites = [dict(s, bytes=int(8.8 * GiB)) if "ncclCuMemAlloc" in s["label"] else s for s in sites]
    if rank == 300:
        categories = [(n, b + 6 * GiB if n == "activation" else b) for n, b in categories]
        sites = [dict(s, bytes=s["bytes"] + 6 * GiB) if s["label"] == "forward at model.py:88" else s
                 for s in sites]
    if rank == 1000:
        categories = [(n, b + 3 * GiB if n == "other_tensor" else b) for n, b in categories]
        sites.append(site("cache_batch at train.py:120", "cache_batch at train.py:120",
                          [py("cache_batch", "train.py", 120)], 3 * GiB, 1))
    return summary(rank, [(n, int(b)) for n, b in categories], sites)


def write_fleet(directory, ranks=1024, seed=23):
    """Writes rank<R>.summary.json for R in 0..ranks-1; returns the planted outlier ranks."""
    rng = random.Random(seed)
    for rank in range(ranks):
        with open(os.path.join(directory, f"rank{rank:04d}.summary.json"), "w") as f:
            json.dump(rank_summary(rank, rng), f, indent=1)
    return [r for r in PLANTED if r < ranks]
