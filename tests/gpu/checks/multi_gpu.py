# Two GPUs (issue 24): a small transformer (workloads/dist_train.py) trained with DDP and with FSDP2,
# eager and compiled, under `memguard run -- torchrun --nproc-per-node 2` against the same runs
# without memguard; `memguard merge` over the per-rank reports. Exec'd by acceptance.py (check, Skip,
# ctx, HERE are its names). Every check skips with fewer GPUs than ranks (MG_MGPU_NPROC, default 2).
# The per-rank OOM, the outlier rank and allocator mode under FSDP2 are in multi_gpu_ranks.py.
#
# Each job runs in its own directory OUT/mgpu/<tag>/: the workload's results rank<R>.json, the
# reports rank<R>.<pid>.mgr (memguard run --output) and the summaries memguard run writes beside them.

_MGPU_STEPS = ("--steps", "20", "--warmup", "5")
# MG_MGPU_NPROC=1 runs the checks that make sense with one rank (the DDP and FSDP2 arms, merge,
# allocator mode under FSDP2) on a one-GPU machine: a smoke test of the workload and the launcher
# until two GPUs are lent; the checks that need a second rank skip. The acceptance is with 2.
import os as _mgpu_os
_MGPU_NPROC = int(_mgpu_os.environ.get("MG_MGPU_NPROC", "2"))
_MGPU_RANKS = tuple(range(_MGPU_NPROC))
# A step-time ratio above this fails; below it, the ratio is printed, not judged: one run of each arm
# of a few tens of steps is no benchmark (docs/benchmarks.md holds those), and noise between two
# processes' medians reaches several percent.
_MGPU_STEP_RATIO_LIMIT = 1.10


def _mgpu_need_gpus(ctx):
    def count():
        p = ctx.run([ctx.python, "-c", "import torch; print(torch.cuda.device_count())"])
        return int(p.stdout.strip().splitlines()[-1])
    n = ctx.once("mgpu_gpu_count", count)
    if n < _MGPU_NPROC:
        raise Skip(f"needs {_MGPU_NPROC} GPUs (torch.cuda.device_count() = {n})")


def _mgpu_need_two_ranks(ctx):
    _mgpu_need_gpus(ctx)
    if _MGPU_NPROC < 2:
        raise Skip(f"needs 2 ranks (MG_MGPU_NPROC={_MGPU_NPROC})")


def _mgpu_job(ctx, tag, args=(), memguard=True, nproc=None, run_opts=()):
    """Runs dist_train.py under torchrun (under `memguard run` when memguard) once per tag. Returns
    {"results": {rank: result}, "reports": {rank: path}, "summaries": {rank: dict}, "stdout", "stderr",
    "seconds", "dir"}: the reports of the worker processes only, matched by pid."""
    nproc = nproc or _MGPU_NPROC

    def go():
        d = ctx.out / "mgpu" / tag
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        torchrun = [ctx.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
                    str(HERE / "workloads" / "dist_train.py"), str(d / "rank"), *args,
                    "--inductor-cache", str(d / "inductor")]
        cmd = torchrun
        if memguard:
            cmd = [str(ctx.cli), "run", "--output", str(d / "rank%r.%p.mgr"), *run_opts, "--", *torchrun]
        # NVLink multicast stays off (the device machines' rule: it can take a shared host's GPUs down).
        env = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
               "NVSHMEM_DISABLE_NVLS": "1"}
        p = ctx.run(cmd, env=env, timeout=580)
        results = {}
        for r in range(nproc):
            res = json.loads((d / f"rank.{r}.json").read_text())
            results[res["rank"]] = res
        job = {"results": results, "reports": {}, "summaries": {}, "stdout": p.stdout, "stderr": p.stderr,
               "seconds": p.seconds, "dir": d, "others": []}
        if memguard:
            by_pid = {res["pid"]: r for r, res in results.items()}
            for f in sorted(d.glob("rank*.mgr")):
                pid = int(f.name.rsplit(".", 2)[-2])
                if pid not in by_pid:
                    job["others"].append(f.name)  # the launcher, had it touched CUDA
                    continue
                job["reports"][by_pid[pid]] = f
                s = Path(str(f) + ".summary.json")
                job["summaries"][by_pid[pid]] = json.loads(s.read_text()) if s.exists() else None
        print(f"[{tag}] {'memguard run -- ' if memguard else ''}torchrun --nproc-per-node {nproc} dist_train.py "
              f"{' '.join(args)}: {p.seconds:.1f} s; reports {[f.name for f in job['reports'].values()]}"
              + (f", other reports {job['others']}" if job["others"] else ""))
        return job
    return ctx.once(("mgpu", tag), go)


def _mgpu_categories(summary):
    return {c["name"]: c["bytes"] for c in (summary.get("categories_at_peak") or [])}


def _mgpu_gib(n):
    return f"{n / 2**30:.3f} GiB"


def _mgpu_arms(ctx, mode, compiled):
    """The arm without memguard, then the one under memguard run (interleaved: one config at a time)."""
    args = ("--mode", mode, *(("--compile",) if compiled else ()), *_MGPU_STEPS)
    name = f"{mode}_{'compiled' if compiled else 'eager'}"
    plain = _mgpu_job(ctx, name + "_plain", args, memguard=False)
    mg = _mgpu_job(ctx, name + "_memguard", args, memguard=True)
    return plain, mg


def _mgpu_compare(ctx, mode, compiled):
    _mgpu_need_gpus(ctx)
    plain, mg = _mgpu_arms(ctx, mode, compiled)
    ratios = []
    for r in _MGPU_RANKS:
        a, b = plain["results"][r], mg["results"][r]
        ratio = b["step_time_s"] / a["step_time_s"]
        ratios.append(ratio)
        print(f"rank {r}: losses first {b['losses'][0]} last {b['losses'][-1]} (memguard) / "
              f"{a['losses'][0]} {a['losses'][-1]} (without); equal: {a['losses'] == b['losses']}")
        print(f"rank {r}: median step {1e3 * a['step_time_s']:.2f} ms without, {1e3 * b['step_time_s']:.2f} ms "
              f"under memguard run: ratio {ratio:.3f}; max_memory_allocated {a['max_memory_allocated']} / "
              f"{b['max_memory_allocated']}, max_memory_reserved {a['max_memory_reserved']} / "
              f"{b['max_memory_reserved']}")
    for r, f in sorted(mg["reports"].items()):
        s = mg["summaries"][r]
        print(f"rank {r}: report {f.name} ({f.stat().st_size} bytes), summary: rank {s and s['rank']}, "
              f"complete {s and s['complete']}, peak {s and s['peak']['bytes']}, devices {s and s['devices']}, "
              f"steps {s and (s['steps'] or {}).get('count')}, compiles {s and s['compiles']}")
    print(f"step-time ratios (memguard / without) {[round(x, 3) for x in ratios]}; fails only above "
          f"{_MGPU_STEP_RATIO_LIMIT} (one run per arm: not a benchmark)")
    # `memguard run` names the one summary it wrote, or counts them (tools/memguard/cmd_run.cpp).
    said = (r"memguard: summary: " if len(_MGPU_RANKS) == 1 else
            rf"memguard: {len(_MGPU_RANKS)} rank summaries beside the reports")
    assert re.search(said, mg["stderr"]), mg["stderr"][-3000:]
    # NCCL frees its cuMem buffers with a retained reference (retain, release, unmap, release): one
    # `n` per handle, so the reports read without a release of a released handle; with two ranks
    # it maps its peers' buffers from imported handles (`m`), which the reports know.
    for said in ("which no unreleased N or m record created", "which no N or m record made"):
        assert said not in mg["stderr"], mg["stderr"][-3000:]
    for r in _MGPU_RANKS:
        assert plain["results"][r]["losses"] == mg["results"][r]["losses"], f"rank {r}: losses differ"
        assert len(mg["results"][r]["losses"]) == int(_MGPU_STEPS[1])
    assert sorted(mg["reports"]) == list(_MGPU_RANKS), mg["reports"]
    for r in _MGPU_RANKS:
        s = mg["summaries"][r]
        assert s is not None, f"no summary beside rank {r}'s report"
        assert s["rank"] == r and s["pid"] == mg["results"][r]["pid"] and s["complete"], s
        assert r in s["devices"], s["devices"]  # rank r trains on cuda:r
        # Every byte PyTorch's allocator reserved lies in GPU memory memguard saw allocated.
        assert s["gpu"]["peak_bytes"] >= mg["results"][r]["max_memory_reserved"], (s["gpu"], mg["results"][r])
        if compiled:
            assert s["compiles"] >= 1, s["compiles"]
    assert max(ratios) <= _MGPU_STEP_RATIO_LIMIT, ratios


@check("multi-gpu", "DDP eager under memguard run -- torchrun (2 GPUs): a report per rank, losses bitwise "
                    "equal to the run without memguard, step-time ratio")
def mgpu_ddp_eager(ctx):
    _mgpu_compare(ctx, "ddp", False)


@check("multi-gpu", "DDP compiled (fresh inductor cache per process): losses bitwise equal, step-time ratio")
def mgpu_ddp_compiled(ctx):
    _mgpu_compare(ctx, "ddp", True)


@check("multi-gpu", "FSDP2 (fully_shard) eager under memguard run -- torchrun: losses bitwise equal, step-time ratio")
def mgpu_fsdp2_eager(ctx):
    _mgpu_compare(ctx, "fsdp2", False)


@check("multi-gpu", "FSDP2 compiled: losses bitwise equal, step-time ratio")
def mgpu_fsdp2_compiled(ctx):
    _mgpu_compare(ctx, "fsdp2", True)


@check("multi-gpu", "memguard merge over the DDP and FSDP2 runs: one row per rank, NCCL's memory per rank "
                    "from native stacks, categories per rank")
def mgpu_merge(ctx):
    _mgpu_need_gpus(ctx)
    for mode in ("ddp", "fsdp2"):
        _, mg = _mgpu_arms(ctx, mode, False)
        files = [str(mg["reports"][r]) for r in _MGPU_RANKS]
        print(f"--- {mode}:")
        text = ctx.run([str(ctx.cli), "merge", *files]).stdout
        print(text)
        merged = json.loads(ctx.run([str(ctx.cli), "merge", "--json", *files]).stdout)
        for row in merged["ranks"]:
            print(f"merge --json rank {row['rank']}: peak_bytes {row['peak_bytes']}, from_summary "
                  f"{row['from_summary']}, oom_events {row['oom_events']}, top_site {row['top_site']}")
        nccl = {}
        for r in _MGPU_RANKS:
            s = mg["summaries"][r]
            cats = _mgpu_categories(s)
            nccl[r] = cats.get("nccl", 0)
            print(f"rank {r} categories at the peak ({s['peak']['bytes_of']} bytes): "
                  + ", ".join(f"{k} {_mgpu_gib(v)}" for k, v in cats.items()))
            nccl_sites = [t for t in s["sites_at_peak"]["top"] if any("libnccl" in fr for fr in t["frames"])]
            for t in nccl_sites[:2]:
                print(f"rank {r} NCCL site at the peak: {t['label']} {_mgpu_gib(t['bytes'])}, native frames "
                      f"{[fr for fr in t['frames'] if not fr.startswith('py ')][:4]}")
        print(f"NCCL bytes at the peak per rank (summaries, from native stacks): {nccl}; merge's text and "
              f"--json show no category column (the summaries carry them; merge compares them for outliers: "
              f"against the median with 3 ranks or more, the heavier against the other with 2)")
        print(f"outliers with {len(_MGPU_RANKS)} rank(s): {merged['outliers']}")
        assert sorted(row["rank"] for row in merged["ranks"]) == [str(r) for r in _MGPU_RANKS], merged["ranks"]
        assert all(row["from_summary"] for row in merged["ranks"]), merged["ranks"]
        assert all(row["oom_events"] == 0 for row in merged["ranks"])
        for row in merged["ranks"]:
            assert row["peak_bytes"] >= mg["results"][int(row["rank"])]["max_memory_allocated"], row
        assert all(nccl[r] > 0 for r in _MGPU_RANKS), f"no nccl category at the peak: {nccl}"
        # docs/rank-summary.md: null with one rank; with two, the heavier is compared with the other
        # (`pair`), and two ranks doing the same work differ by less than the floor.
        if len(_MGPU_RANKS) == 1:
            assert merged["outliers"] is None, merged["outliers"]
        else:
            out = merged["outliers"]
            assert out is not None and out["ranks_compared"] == len(_MGPU_RANKS), out
            assert out["pair"] == (len(_MGPU_RANKS) == 2) and out["ranks"] == [], out
