# Allocator mode with expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): memguard's
# allocator grows its pools with the driver's virtual memory calls, as PyTorch's does. Exec'd by
# acceptance.py (check, Skip, ctx, HERE are its names). The fragmenting workload of
# bench/expandable_segments.py runs in fresh processes, PyTorch's allocator and memguard's interleaved
# (ABBA), both with expandable segments; the check prints both arms' figures and what memguard's
# report says about how the tensor memory was obtained.
import importlib.util as _ilu
import json as _json

_spec = _ilu.spec_from_file_location("mg_bench_expandable", HERE.parent.parent / "bench" / "expandable_segments.py")
_bench = _ilu.module_from_spec(_spec)
_spec.loader.exec_module(_bench)

_RUNS = 3
_STEPS = 60


def _expandable_arm(ctx, arm, index):
    result = ctx.out / f"expandable_{arm}_{index}.json"
    env = {"PYTORCH_CUDA_ALLOC_CONF": _bench.EXPANDABLE}
    if arm == "memguard":
        env.update({"MEMGUARD_ALLOCATOR": "memguard",
                    "MEMGUARD_OUTPUT": str(ctx.out / f"expandable_memguard_{index}.%p.mgr")})
    else:
        env["MEMGUARD_ALLOCATOR"] = "native"
    ctx.run([ctx.python, str(_bench.__file__), "--child", str(result), "--steps", str(_STEPS)], env=env,
            preload=arm == "memguard")
    data = _json.loads(result.read_text())
    if arm == "memguard":
        reports = sorted(ctx.out.glob(f"expandable_memguard_{index}.*.mgr"))
        assert len(reports) == 1, reports
        data["calls"] = _bench.report_calls(reports[0])
    return data


@check("allocator-mode-expandable", "expandable segments: no cudaMalloc for tensors, the driver's calls, "
                                    "values equal, peak reserved within 1.02x of PyTorch's")
def alloc_mode_expandable(ctx):
    runs = {"native": [], "memguard": []}
    for i in range(_RUNS):
        for arm in (("native", "memguard") if i % 2 == 0 else ("memguard", "native")):
            d = _expandable_arm(ctx, arm, i)
            runs[arm].append(d)
            print(f"run {i} {arm:8s}: backend {d['backend']}, peak reserved {d['peak_reserved']} "
                  f"({d['peak_reserved'] / 2**20:.1f} MiB), peak allocated {d['peak_allocated']}, "
                  f"{d['stats']}, checksum {d['checksum']}" + (f"\n    report: {d['calls']}" if arm == "memguard" else ""))
    figures, problems = _bench.compare(runs)
    print(f"torch {runs['native'][0]['torch']} on {runs['native'][0]['device']}: median peak reserved native "
          f"{figures['median_native']} memguard {figures['median_memguard']}, ratio {figures['ratio']:.4f} "
          f"(target <= 1.02)")
    for p in problems:
        print("problem:", p)
    assert not problems, problems
