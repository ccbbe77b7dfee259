"""PyTorch's Python memory API, called the same way under either allocator, for the allocator-mode
check "every torch.cuda memory API" (tests/gpu/checks/allocator_mode.py): run once with
MEMGUARD_ALLOCATOR=memguard and once with PyTorch's own allocator, and compared there.

usage: memory_api.py RESULT.json

Writes JSON: the statistics after known allocations (the whole memory_stats dict, the nested
dict's keys, memory_summary's text), after each reset, the memory_allocated / reserved family,
get/set_per_process_memory_fraction, caching_allocator_alloc/delete, _set_allocator_settings
answers, two OOMs (a hopeless request, and one over a memory fraction) with the observer's
arguments and the messages, garbage_collection_threshold's frees, and the API's answers that
raised (name -> error).
"""
import json
import sys
import warnings

import torch

MIB = 1 << 20


def main():
    out = sys.argv[1]
    dev = torch.device("cuda", 0)
    r = {"torch": torch.__version__, "backend": torch.cuda.memory.get_allocator_backend(), "errors": {}}

    def attempt(name, fn):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - recorded, the check judges
            r["errors"][name] = f"{type(e).__name__}: {e}"
            return None

    # Known allocations: small and large pool blocks, a split, a free, a second stream.
    torch.cuda.synchronize()
    keep = [torch.empty(n, dtype=torch.uint8, device=dev) for n in (512, 1000, 4096, 1 << 20, 3 << 20, 25 << 20)]
    tmp = torch.empty(8 << 20, dtype=torch.uint8, device=dev)
    del tmp
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        on_s = torch.empty(2 << 20, dtype=torch.uint8, device=dev)
    on_s.record_stream(torch.cuda.current_stream())
    del on_s
    torch.cuda.synchronize()
    r["stats"] = attempt("memory_stats", lambda: dict(torch.cuda.memory_stats(dev)))
    nested = attempt("memory_stats_as_nested_dict", lambda: torch.cuda.memory_stats_as_nested_dict(dev))
    r["nested_keys"] = nested and {k: sorted(v) if isinstance(v, dict) else type(v).__name__ for k, v in nested.items()}
    r["summary"] = attempt("memory_summary", lambda: torch.cuda.memory_summary(dev))
    r["summary_abbreviated"] = attempt("memory_summary(abbreviated)",
                                       lambda: torch.cuda.memory_summary(dev, abbreviated=True))
    r["family"] = {name: attempt(name, lambda f=getattr(torch.cuda, name): f(dev)) for name in (
        "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved")}
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "memory_stats"):
        r["accelerator_stats"] = attempt("torch.accelerator.memory_stats",
                                         lambda: dict(accelerator.memory_stats(0)))

    # Resets.
    del keep[3:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        attempt("reset_max_memory_allocated", lambda: torch.cuda.reset_max_memory_allocated(dev))
        attempt("reset_max_memory_cached", lambda: torch.cuda.reset_max_memory_cached(dev))
    attempt("reset_peak_memory_stats", lambda: torch.cuda.reset_peak_memory_stats(dev))
    r["after_reset_peak"] = attempt("memory_stats", lambda: dict(torch.cuda.memory_stats(dev)))
    attempt("reset_accumulated_memory_stats", lambda: torch.cuda.reset_accumulated_memory_stats(dev))
    r["after_reset_accumulated"] = attempt("memory_stats", lambda: dict(torch.cuda.memory_stats(dev)))

    # Memory fraction.
    fr = {"get_before": attempt("get_per_process_memory_fraction",
                                lambda: torch.cuda.get_per_process_memory_fraction(dev))}
    attempt("set_per_process_memory_fraction", lambda: torch.cuda.set_per_process_memory_fraction(0.5, dev))
    fr["get_after"] = attempt("get_per_process_memory_fraction", lambda: torch.cuda.get_per_process_memory_fraction(dev))
    attempt("set_per_process_memory_fraction", lambda: torch.cuda.set_per_process_memory_fraction(1.0, dev))
    fr["get_reset"] = attempt("get_per_process_memory_fraction", lambda: torch.cuda.get_per_process_memory_fraction(dev))
    r["fraction"] = fr

    # caching_allocator_alloc / delete.
    ca = {}
    before = torch.cuda.memory_allocated(dev)
    p = attempt("caching_allocator_alloc", lambda: torch.cuda.caching_allocator_alloc(4096, dev.index,
                                                                                      torch.cuda.current_stream()))
    ca["ptr_is_int"] = isinstance(p, int)
    ca["allocated_delta"] = torch.cuda.memory_allocated(dev) - before
    if p is not None:
        attempt("caching_allocator_delete", lambda: torch.cuda.caching_allocator_delete(p))
    ca["after_delete_delta"] = torch.cuda.memory_allocated(dev) - before
    r["caching_allocator"] = ca

    # Allocator settings: the answer, and the max_split_size statistic after it.
    st = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for text in ("max_split_size_mb:256", "max_split_size_mb:10", "garbage_collection_threshold:0.8",
                     "roundup_power2_divisions:4", "expandable_segments:False", "nonsense_key:1", ""):
            try:
                torch.cuda.memory._set_allocator_settings(text)
                answer = "ok"
            except Exception as e:  # noqa: BLE001
                answer = f"{type(e).__name__}: {e}"
            st.append([text, answer, torch.cuda.memory_stats(dev).get("max_split_size")])
    r["settings"] = st

    # OOMs: the observer's arguments and the messages.
    calls = []
    attempt("_cuda_attach_out_of_memory_observer",
            lambda: torch._C._cuda_attach_out_of_memory_observer(lambda *a: calls.append(list(a))))
    oom = {}
    try:
        torch.empty(1 << 50, dtype=torch.uint8, device=dev)
    except Exception as e:  # noqa: BLE001
        oom["message"] = str(e)
        oom["is_torch_oom"] = isinstance(e, torch.cuda.OutOfMemoryError)
    oom["observer_calls"] = list(calls)
    calls.clear()
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(0.05, dev)
    try:
        torch.empty(20 << 30, dtype=torch.uint8, device=dev)
    except Exception as e:  # noqa: BLE001
        oom["fraction_message"] = str(e)
        oom["fraction_is_torch_oom"] = isinstance(e, torch.cuda.OutOfMemoryError)
    oom["fraction_observer_calls"] = list(calls)
    torch.cuda.set_per_process_memory_fraction(1.0, dev)
    oom["num_ooms"] = torch.cuda.memory_stats(dev).get("num_ooms")
    oom["total_memory"] = torch.cuda.get_device_properties(dev).total_memory
    r["oom"] = oom

    # garbage_collection_threshold with a memory fraction of 2 GiB: past half of it, a new segment
    # first frees the cached segments unused longest (two of three 400 MiB ones; one was reused).
    def gc_sequence():
        torch.cuda.empty_cache()
        total = torch.cuda.get_device_properties(dev).total_memory
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.cuda.memory._set_allocator_settings("garbage_collection_threshold:0.5")
        torch.cuda.set_per_process_memory_fraction((2 << 30) / total, dev)
        held = [torch.empty(400 * MIB, dtype=torch.uint8, device=dev) for _ in range(3)]
        del held
        reused = torch.empty(400 * MIB, dtype=torch.uint8, device=dev)
        del reused
        frees = torch.cuda.memory_stats(dev)["num_device_free"]
        big = torch.empty(800 * MIB, dtype=torch.uint8, device=dev)
        s = torch.cuda.memory_stats(dev)
        got = [s["num_device_free"] - frees, s["reserved_bytes.large_pool.current"] // MIB]
        del big
        torch.cuda.set_per_process_memory_fraction(1.0, dev)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.cuda.memory._set_allocator_settings("")
        return got
    r["gc_threshold"] = attempt("garbage_collection_threshold", gc_sequence)
    r["summary_end"] = attempt("memory_summary", lambda: torch.cuda.memory_summary(dev))
    r["still_works"] = float(torch.ones(1024, device=dev).sum().item())
    with open(out, "w") as f:
        json.dump(r, f)


if __name__ == "__main__":
    main()
