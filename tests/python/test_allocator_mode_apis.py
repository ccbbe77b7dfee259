"""Allocator mode (MEMGUARD_ALLOCATOR=memguard): PyTorch's Python memory API answered by memguard.

The real (CPU-only) torch runs its own torch/cuda/memory.py over memguard: a meta-path hook gives
torch._C, while `import torch` loads it, the CUDA entry points a CUDA build has and that the
pluggable-allocator path uses, behaving as PyTorch 2.11's do with a pluggable allocator
(CUDA_SURFACE below: the pluggable allocator object and its setters, raw_alloc / raw_delete
through the allocator's functions, set_memory_fraction through its hook, and the entry points
PyTorch refuses for a pluggable allocator raising its error). torch._C's real
_accelerator_setAllocatorSettings and _accelerator_getDeviceStats stay PyTorch's. The device is
the fake CUDA runtime. memguard switches itself in during `import torch`, as on a GPU.

Children:
  apis      memory_stats (the whole key set, compared with what PyTorch 2.11's native allocator
            returned on an H200, golden/), the nested dict (its keys, the same way),
            memory_summary, memory_allocated/reserved and their max_*, the resets,
            get/set_per_process_memory_fraction, caching_allocator_alloc/delete (recorded in the
            report), _set_allocator_settings (applied live, bad input refused by PyTorch,
            unapplied settings named once), torch._C._accelerator_getDeviceStats.
  early     _set_allocator_settings before CUDA started: applied when the allocator is created;
            garbage_collection_threshold with a memory fraction frees the oldest cached segments.
  golden    the calls of tests/gpu/probes/native_allocator_goldens.py: every memory_stats value at
            its three points equal to what PyTorch 2.11's own allocator answered on an H200.
  oom       through PyTorch's own error handling (mg_torch_binding, tests/torch, built where
            torch's headers are): observers attached with torch._C._cuda_attach_out_of_memory_observer
            are called with PyTorch's arguments, also when the allocating thread released the GIL,
            and on a thread that never ran Python, and an observer that raises does not replace the
            OOM; the message is PyTorch's; the
            memory fraction's "allowed" sentence; num_ooms. Skipped (said so) without the binding.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

MIB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
BINDING_DIR = os.environ.get("MGTEST_TORCH_BINDING_DIR", "")

# PyTorch's OOM message (c10/cuda/CUDACachingAllocator.cpp) with its figures as wildcards.
SIZE = r"\d+(?:\.\d\d (?:KiB|MiB|GiB)| bytes)"
TORCH_OOM = re.compile(
    r"^CUDA out of memory\. Tried to allocate (?P<alloc>" + SIZE + r")\. GPU (?P<device>\d+) has a total capacity of "
    r"(?P<total>" + SIZE + r") of which (?P<free>" + SIZE + r") is free\. "
    r"(?:(?:Including non-PyTorch memory, this process|Process \d+) has " + SIZE + r" memory in use\. )*"
    r"(?:(?P<allowed>" + SIZE + r") allowed; )?"
    r"Of the allocated memory (?P<allocated>" + SIZE + r") is allocated by PyTorch, "
    r"(?:with " + SIZE + r" allocated in private pools \(e\.g\., CUDA Graphs\), )?"
    r"and (?P<unallocated>" + SIZE + r") is reserved by PyTorch but unallocated\. If reserved but unallocated memory "
    r"is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation\.  See "
    r"documentation for Memory Management  \(https://[^)]+\)")

CUDA_SURFACE = r'''
import ctypes
import importlib.abc
import importlib.util
import sys

state = {"current": None, "live": {}, "device": 0, "settings_calls": []}


class _CUDAPluggableAllocator:
    """torch._C._CUDAPluggableAllocator: the setters take uint64 function addresses."""

    def __init__(self, alloc, free):
        self.alloc, self.free, self.hooks = alloc, free, {}

    def _set(self, name, address):
        if not isinstance(address, int) or address <= 0:
            raise TypeError("expected a uint64 function address")
        self.hooks[name] = address

    def set_init_fn(self, a): self._set("init", a)
    def set_reset_fn(self, a): self._set("reset", a)
    def set_memory_fraction_fn(self, a): self._set("memory_fraction", a)
    def set_base_alloc_fn(self, a): self._set("base_alloc", a)
    def set_record_stream_fn(self, a): self._set("record_stream", a)
    def set_begin_allocate_to_pool(self, a): self._set("begin_pool", a)
    def set_end_allocate_to_pool_fn(self, a): self._set("end_pool", a)
    def set_release_pool(self, a): self._set("release_pool", a)


ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
INIT = ctypes.CFUNCTYPE(None, ctypes.c_int)
FRACTION = ctypes.CFUNCTYPE(None, ctypes.c_double, ctypes.c_int)


def lazy_init(device_count=1):
    """What CUDA's lazy initialization does to the allocator: init_fn(device_count)."""
    INIT(state["current"].hooks["init"])(device_count)


def allocate(size, stream=0):
    """CUDAPluggableAllocator::malloc: alloc_fn(size, current device, stream), recorded."""
    a = state["current"]
    p = ALLOC(a.alloc)(size, state["device"], stream)
    state["live"][p] = (size, state["device"], stream)
    return p


def deallocate(p):
    """CUDAPluggableAllocator::raw_delete: the recorded size, device and stream to free_fn."""
    if p not in state["live"]:
        raise RuntimeError("Trying to free a pointer not allocated here")
    size, device, stream = state["live"].pop(p)
    FREE(state["current"].free)(p, size, device, stream)


def _cuda_customAllocator(alloc, free):
    return _CUDAPluggableAllocator(alloc, free)


def _cuda_changeCurrentAllocator(a):
    state["current"] = a


def _unsupported(what):
    def f(*args, **kwargs):
        raise RuntimeError(f"CUDAPluggableAllocator does not yet support {what}")
    return f


def _cuda_setMemoryFraction(fraction, device):
    FRACTION(state["current"].hooks["memory_fraction"])(fraction, device)


def _cuda_cudaCachingAllocator_raw_alloc(size, stream):
    return allocate(size, stream)


def _cuda_emptyCache():
    """CUDAPluggableAllocator::emptyCache: the reset hook."""
    ctypes.CFUNCTYPE(None)(state["current"].hooks["reset"])()


def _cuda_exchangeDevice(device):
    prev, state["device"] = state["device"], max(device, 0)
    return prev


SURFACE = {
    "_cuda_customAllocator": _cuda_customAllocator,
    "_cuda_changeCurrentAllocator": _cuda_changeCurrentAllocator,
    "_cuda_memoryStats": _unsupported("getDeviceStats"),
    "_cuda_resetPeakMemoryStats": _unsupported("resetPeakStats"),
    "_cuda_resetAccumulatedMemoryStats": _unsupported("resetAccumulatedStats"),
    "_cuda_getMemoryFraction": _unsupported("getMemoryFraction"),
    "_cuda_attach_out_of_memory_observer": _unsupported("attachOutOfMemoryObserver"),
    "_cuda_setMemoryFraction": _cuda_setMemoryFraction,
    "_cuda_cudaCachingAllocator_raw_alloc": _cuda_cudaCachingAllocator_raw_alloc,
    "_cuda_cudaCachingAllocator_raw_delete": deallocate,
    "_cuda_emptyCache": _cuda_emptyCache,
    "_cuda_getDevice": lambda: state["device"],
    "_cuda_exchangeDevice": _cuda_exchangeDevice,
    "_cuda_maybeExchangeDevice": _cuda_exchangeDevice,
}


class _AddSurface(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch._C":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        create = spec.loader.create_module

        def create_module(s):
            m = create(s)
            for k, v in SURFACE.items():
                setattr(m, k, v)
            return m

        spec.loader.create_module = create_module
        return spec


sys.meta_path.insert(0, _AddSurface())
'''


def load_surface():
    ns = {"__name__": "cuda_surface"}
    exec(compile(CUDA_SURFACE, "cuda_surface", "exec"), ns)
    return ns


def start(ns):
    """import torch (memguard switches in), then CUDA's lazy initialization, with the fake runtime."""
    import ctypes
    import torch
    ctypes.CDLL(os.environ["MGTEST_FAKE_CUDART_IN_CHILD"])
    torch.cuda._initialized = True  # what torch.cuda._lazy_init leaves behind
    ns["lazy_init"](1)
    return torch


def child(arm):
    import warnings
    kind = arm["kind"]
    ns = load_surface()
    r = {}
    if kind == "early":
        import torch
        # Before CUDA starts (no allocator yet): PyTorch takes the text, memguard keeps it.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.cuda.memory._set_allocator_settings("max_split_size_mb:100")
        torch = start(ns)
        r["max_split_size"] = torch.cuda.memory_stats(0)["max_split_size"]
        p = ns["allocate"](150 * MIB)
        r["oversize"] = torch.cuda.memory_stats(0)["oversize_allocations.current"]
        ns["deallocate"](p)
        # garbage_collection_threshold with a memory fraction (the fake device has 1 GiB): past
        # half of 512 MiB, a new segment first frees the cached segments unused longest.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.cuda.memory._set_allocator_settings("garbage_collection_threshold:0.5")
        torch.cuda.set_per_process_memory_fraction(0.5, 0)
        torch.cuda.empty_cache()
        held = [ns["allocate"](100 * MIB) for _ in range(3)]
        for q in held:
            ns["deallocate"](q)
        ns["deallocate"](ns["allocate"](100 * MIB))  # one cached segment used again
        frees = torch.cuda.memory_stats(0)["num_device_free"]
        big = ns["allocate"](200 * MIB)
        s = torch.cuda.memory_stats(0)
        r["gc"] = [s["num_device_free"] - frees, s["reserved_bytes.all.current"]]
        ns["deallocate"](big)
        return r
    if kind == "golden":
        # The calls of tests/gpu/probes/native_allocator_goldens.py, as PyTorch's allocator sees
        # them, on memguard's: the statistics at its three points (golden/native_2.11_h200/).
        import ctypes
        torch = start(ns)
        alloc, free = ns["allocate"], ns["deallocate"]
        fake = ctypes.CDLL(os.environ["MGTEST_FAKE_CUDART_IN_CHILD"])
        side = ctypes.c_void_p()
        assert fake.cudaStreamCreate(ctypes.byref(side)) == 0
        record_stream = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(
            ns["state"]["current"].hooks["record_stream"])
        keep = [alloc(n) for n in (512, 4096, 1 << 20, 3 << 20, 25 << 20)]
        free(alloc(8 << 20))
        on_side = alloc(2 << 20, side.value)
        record_stream(on_side, None)  # used on the current stream, then freed: waits for its event
        free(on_side)
        r["stats"] = dict(torch.cuda.memory_stats(0))
        a, b = alloc(6 << 20), alloc(300)
        free(a)
        torch.cuda.empty_cache()
        free(b)
        torch.cuda.reset_peak_memory_stats(0)
        r["stats_after_reset_peak"] = dict(torch.cuda.memory_stats(0))
        torch.cuda.reset_accumulated_memory_stats(0)
        r["stats_after_reset_accumulated"] = dict(torch.cuda.memory_stats(0))
        for p in keep:
            free(p)
        return r
    if kind == "apis":
        torch = start(ns)
        mem = torch.cuda.memory
        r["stats_replaced"] = "memguard" in (torch._C._cuda_memoryStats.__doc__ or "")
        r["empty_keys"] = sorted(mem.memory_stats(0))
        alloc, free = ns["allocate"], ns["deallocate"]
        p1 = alloc(1000)
        p2 = alloc(3 * MIB)
        p3 = alloc(25 * MIB)
        s = mem.memory_stats(0)
        r["after_alloc"] = {k: s[k] for k in s if k.endswith(".current") or k.startswith("num_")}
        r["nested"] = {k: sorted(v) if isinstance(v, dict) else type(v).__name__
                       for k, v in mem.memory_stats_as_nested_dict(0).items()}
        r["nested_all"] = sorted(mem.memory_stats_as_nested_dict(0)["allocated_bytes"]["all"])
        r["accelerator_equal"] = torch._C._accelerator_getDeviceStats(0) == torch._C._cuda_memoryStats(0)
        # torch.accelerator.memory_stats answers only when this is true (on this CPU build PyTorch's
        # own raises: no accelerator); PyTorch 2.11 asks its own, never initialized, allocator.
        r["accelerator_initialized"] = torch._C._accelerator_isAllocatorInitialized()
        free(p2)
        r["after_free"] = [mem.memory_allocated(0), mem.max_memory_allocated(0), mem.memory_reserved(0),
                           mem.max_memory_reserved(0)]
        s = mem.memory_stats(0)
        r["after_free_split"] = [s["inactive_split.large_pool.current"], s["inactive_split_bytes.all.current"]]
        summary = mem.memory_summary(0)
        r["summary_head"] = summary.splitlines()[1:5]
        r["summary_allocated"] = [line for line in summary.splitlines() if "Allocated memory" in line]
        r["summary_abbreviated"] = len(mem.memory_summary(0, abbreviated=True).splitlines())
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            mem.reset_max_memory_allocated(0)
        r["reset_max_warned"] = [str(x.category.__name__) for x in w]
        r["after_reset_peak"] = [mem.max_memory_allocated(0), mem.max_memory_reserved(0)]
        mem.reset_accumulated_memory_stats(0)
        s = mem.memory_stats(0)
        r["after_reset_accumulated"] = [s["allocated_bytes.all.allocated"], s["allocated_bytes.all.freed"],
                                        s["num_device_alloc"], s["allocated_bytes.all.current"]]
        # caching_allocator_alloc / delete: PyTorch's raw_alloc through the allocator's functions.
        before = mem.memory_allocated(0)
        q = torch.cuda.caching_allocator_alloc(4096, 0, 0)
        r["raw_alloc"] = [isinstance(q, int), mem.memory_allocated(0) - before, q]
        torch.cuda.caching_allocator_delete(q)
        r["raw_delete"] = mem.memory_allocated(0) - before
        # Memory fraction: 1.0 until set; then allowed/total as PyTorch reads it back.
        r["fraction_before"] = torch.cuda.get_per_process_memory_fraction(0)
        torch.cuda.set_per_process_memory_fraction(0.25, 0)
        r["fraction_after"] = torch.cuda.get_per_process_memory_fraction(0)
        torch.cuda.set_per_process_memory_fraction(1.0, 0)
        r["fraction_reset"] = torch.cuda.get_per_process_memory_fraction(0)
        try:
            torch.cuda.get_per_process_memory_fraction(7)
            r["fraction_bad_device"] = "no error"
        except RuntimeError as e:
            r["fraction_bad_device"] = str(e)
        # Allocator settings, live.
        settings = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for text in ("max_split_size_mb:256", "max_split_size_mb:10", "garbage_collection_threshold:0.8",
                         "garbage_collection_threshold:0.8,max_split_size_mb:40,release_lock_on_cudamalloc:True"):
                try:
                    mem._set_allocator_settings(text)
                    outcome = "ok"
                except Exception as e:  # noqa: BLE001
                    outcome = type(e).__name__
                settings.append([text, outcome, mem.memory_stats(0)["max_split_size"]])
        r["settings"] = settings
        big = alloc(60 * MIB)  # oversize now (40 MiB limit)
        s = mem.memory_stats(0)
        r["oversize"] = [s["oversize_allocations.current"], s["oversize_segments.current"]]
        free(big)
        free(p1)
        free(p3)
        r["end_allocated"] = mem.memory_allocated(0)
        return r
    if kind == "oom":
        if not BINDING_DIR or not os.path.isdir(BINDING_DIR):
            return {"skipped": f"no mg_torch_binding in {BINDING_DIR!r}"}
        torch = start(ns)
        sys.path.insert(0, BINDING_DIR)
        import mg_torch_binding as b
        calls = []
        torch._C._cuda_attach_out_of_memory_observer(lambda *a: calls.append(list(a)))

        def fill(fn, n):
            held, error = [], None
            try:
                for _ in range(n):
                    held.append(fn(24 * MIB))
            except Exception as e:  # noqa: BLE001: the type is what the test looks at
                error = [type(e).__module__ + "." + type(e).__qualname__,
                         isinstance(e, torch.cuda.OutOfMemoryError), str(e)]
            return held, error

        # The GIL held across the allocation (a binding that keeps it).
        held, r["error"] = fill(b.alloc, 8)
        r["held"] = len(held)
        r["calls"] = list(calls)
        r["num_ooms"] = torch.cuda.memory_stats(0)["num_ooms"]
        for p in held:
            ns["FREE"](ns["state"]["current"].free)(p, 24 * MIB, 0, None)

        # The GIL released, as PyTorch's operators do; an observer that raises does not replace
        # the OutOfMemoryError, and the others still run.
        def bad(*a):
            raise ValueError("observer failed")
        torch._C._cuda_attach_out_of_memory_observer(bad)
        calls.clear()
        torch.cuda.empty_cache()  # the four segments go back: the fraction counts reserved memory
        torch.cuda.set_per_process_memory_fraction(0.5, 0)
        held, r["error_released"] = fill(b.alloc_released, 8)
        r["held_released"] = len(held)
        r["calls_released"] = list(calls)
        for p in held:
            ns["FREE"](ns["state"]["current"].free)(p, 24 * MIB, 0, None)
        # A thread that never ran Python: the observers still run (PyTorch takes the GIL there).
        calls.clear()
        try:
            b.alloc_on_thread(200 * MIB)
            r["thread_error"] = "no error"
        except MemoryError as e:
            r["thread_error"] = str(e).splitlines()[0]
        r["calls_thread"] = list(calls)
        r["num_ooms_after"] = torch.cuda.memory_stats(0)["num_ooms"]
        try:
            torch._C._cuda_attach_out_of_memory_observer()
            r["attach_no_arg"] = "no error"
        except TypeError as e:
            r["attach_no_arg"] = "TypeError"
        return r
    raise ValueError(kind)


def records(path, types):
    out = []
    with harness.open_report(path) as f:
        for line in f:
            w = line.rstrip("\n").split(" ")
            if w[0] in types:
                out.append(w)
    return out


class AllocatorModeApis(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        env = {"MGTEST_FAKE_CUDART_IN_CHILD": harness.fake_cudart_path(), "MEMGUARD_ALLOCATOR": "memguard",
               "MGTEST_TORCH_BINDING_DIR": BINDING_DIR}
        cls.runs = {
            "apis": harness.run_child(__file__, {"kind": "apis"}, env=dict(env, FAKE_CUDA_CAPACITY=str(1024 * MIB))),
            "early": harness.run_child(__file__, {"kind": "early"}, env=dict(env, FAKE_CUDA_CAPACITY=str(1024 * MIB))),
            "golden": harness.run_child(__file__, {"kind": "golden"}, env=env),
            "oom": harness.run_child(__file__, {"kind": "oom"}, env=dict(env, FAKE_CUDA_CAPACITY=str(100 * MIB))),
        }
        with open(os.path.join(HERE, "golden", "torch_memory_stats_keys.json")) as f:
            cls.golden_keys = json.load(f)["keys"]
        with open(os.path.join(HERE, "golden", "torch_memory_stats_nested_keys.json")) as f:
            cls.golden_nested = json.load(f)["nested"]

    def result(self, name):
        run = self.runs[name]
        self.assertChildOk(run)
        return run.result

    def test_memory_stats_has_pytorchs_keys_exactly(self):
        r = self.result("apis")
        self.assertTrue(r["stats_replaced"])
        self.assertEqual(r["empty_keys"], self.golden_keys)
        self.assertEqual(sorted(r["after_alloc"]), sorted(k for k in self.golden_keys
                                                          if k.endswith(".current") or k.startswith("num_")))
        self.assertEqual(r["nested"], self.golden_nested)
        self.assertEqual(r["nested_all"], ["allocated", "current", "freed", "peak"])
        self.assertTrue(r["accelerator_equal"])
        self.assertIs(r["accelerator_initialized"], True)

    def test_every_value_equals_pytorch_211_on_an_h200(self):
        r = self.result("golden")
        for name in ("stats", "stats_after_reset_peak", "stats_after_reset_accumulated"):
            with open(os.path.join(HERE, "golden", "native_2.11_h200", name + ".json")) as f:
                want = json.load(f)
            got = r[name]
            self.assertEqual(sorted(got), sorted(want), name)
            self.assertEqual({k: got[k] for k in want if got[k] != want[k]},
                             {}, f"{name}: memguard's values where PyTorch's differ ({{key: memguard}})")

    def test_values_follow_pytorchs_rules(self):
        s = self.result("apis")["after_alloc"]
        # 1000 B: a 1024-byte block of a 2 MiB small segment; 3 MiB: a block split from a 20 MiB
        # segment; 25 MiB: a 26 MiB segment, not split (1 MiB left is not more than 1 MiB).
        want = {
            "allocated_bytes.all.current": 1024 + 3 * MIB + 26 * MIB,
            "allocated_bytes.small_pool.current": 1024,
            "allocated_bytes.large_pool.current": 29 * MIB,
            "requested_bytes.all.current": 1000 + 3 * MIB + 25 * MIB,
            "allocation.all.current": 3, "allocation.small_pool.current": 1, "allocation.large_pool.current": 2,
            "active.all.current": 3, "active_bytes.all.current": 1024 + 29 * MIB,
            "segment.all.current": 3, "segment.large_pool.current": 2,
            "reserved_bytes.all.current": 48 * MIB, "reserved_bytes.small_pool.current": 2 * MIB,
            "inactive_split.all.current": 2, "inactive_split_bytes.all.current": 2 * MIB - 1024 + 17 * MIB,
            "num_device_alloc": 3, "num_device_free": 0, "num_ooms": 0, "num_alloc_retries": 0,
            "oversize_allocations.current": 0,
        }
        self.assertEqual({k: s[k] for k in want}, want)

    def test_allocated_reserved_resets_and_summary(self):
        r = self.result("apis")
        peak = 1024 + 29 * MIB
        self.assertEqual(r["after_free"], [1024 + 26 * MIB, peak, 48 * MIB, 48 * MIB])
        self.assertEqual(r["after_free_split"], [0, 2 * MIB - 1024])  # the 20 MiB segment whole again
        self.assertEqual(r["summary_head"][0].strip("|").strip(), "PyTorch CUDA memory summary, device ID 0")
        self.assertIn("CUDA OOMs: 0", r["summary_head"][2])
        self.assertEqual(len(r["summary_allocated"]), 1)
        self.assertIn("26625 KiB", r["summary_allocated"][0])  # current: 1024 B + 26 MiB, in KiB
        self.assertGreater(r["summary_abbreviated"], 10)
        self.assertEqual(r["reset_max_warned"], ["FutureWarning"])
        self.assertEqual(r["after_reset_peak"], [1024 + 26 * MIB, 48 * MIB])
        self.assertEqual(r["after_reset_accumulated"], [0, 0, 0, 1024 + 26 * MIB])
        self.assertEqual(r["end_allocated"], 0)

    def test_caching_allocator_alloc_and_delete_reach_memguard(self):
        run = self.runs["apis"]
        r = self.result("apis")
        ok, grew, ptr = r["raw_alloc"]
        self.assertTrue(ok)
        self.assertEqual(grew, 4096)
        self.assertEqual(r["raw_delete"], 0)
        rep = run.need_report()
        self.assertIn(ptr, [int(w[3], 16) for w in records(rep.path, "T")])
        self.assertIn(ptr, [int(w[3], 16) for w in records(rep.path, "t")])

    def test_memory_fraction(self):
        r = self.result("apis")
        self.assertEqual(r["fraction_before"], 1.0)
        total = 1024 * MIB
        self.assertEqual(r["fraction_after"], int(0.25 * total) / total)
        self.assertEqual(r["fraction_reset"], 1.0)
        self.assertIn("does not yet support getMemoryFraction", r["fraction_bad_device"])

    def test_allocator_settings_apply_live(self):
        run = self.runs["apis"]
        r = self.result("apis")
        self.assertEqual(r["settings"], [
            ["max_split_size_mb:256", "ok", 256 * MIB],
            ["max_split_size_mb:10", "ValueError", 256 * MIB],  # PyTorch refuses it; nothing changes
            ["garbage_collection_threshold:0.8", "ok", -1],     # PyTorch resets max_split_size
            ["garbage_collection_threshold:0.8,max_split_size_mb:40,release_lock_on_cudamalloc:True", "ok", 40 * MIB],
        ])
        self.assertEqual(r["oversize"], [1, 1])
        # The one setting memguard's allocator does not apply is named, once.
        named = [line for line in run.stderr.splitlines() if "_set_allocator_settings" in line]
        self.assertEqual(len(named), 1, run.describe())
        self.assertIn("release_lock_on_cudamalloc:True: not used", named[0])

    def test_settings_before_cuda_starts(self):
        r = self.result("early")
        self.assertEqual(r["max_split_size"], 100 * MIB)
        self.assertEqual(r["oversize"], 1)
        # The two segments never used again were freed before the new one; the reused one stays.
        self.assertEqual(r["gc"], [2, 300 * MIB])

    def test_oom_observers_message_and_counts(self):
        r = self.result("oom")
        if "skipped" in r:
            self.skipTest(r["skipped"])
        # 100 MiB: four 24 MiB blocks fit, the fifth fails after the cache and a collection.
        self.assertEqual(r["held"], 4)
        kind, is_oom, message = r["error"]
        self.assertEqual(kind, "torch.OutOfMemoryError")
        self.assertTrue(is_oom)
        first = message.splitlines()[0]
        m = TORCH_OOM.match(first)
        self.assertIsNotNone(m, message)
        self.assertEqual(m.group("alloc"), "24.00 MiB")
        self.assertEqual(m.group("total"), "100.00 MiB")
        self.assertEqual(m.group("free"), "4.00 MiB")
        self.assertIsNone(m.group("allowed"))
        self.assertEqual(m.group("allocated"), "96.00 MiB")
        self.assertEqual(m.group("unallocated"), "0 bytes")
        self.assertIn("memguard (MEMGUARD_ALLOCATOR=memguard): requested 25165824 bytes", message)
        # PyTorch's arguments: device, the allocation tried, the limit or the total, free bytes.
        self.assertEqual(r["calls"], [[0, 24 * MIB, 100 * MIB, 4 * MIB]])
        self.assertEqual(r["num_ooms"], 1)
        # Released GIL, the fraction's limit of 50 MiB: two blocks fit, the third is refused.
        self.assertEqual(r["held_released"], 2)
        kind, is_oom, message = r["error_released"]
        self.assertTrue(is_oom, r["error_released"])
        m = TORCH_OOM.match(message.splitlines()[0])
        self.assertIsNotNone(m, message)
        self.assertEqual(m.group("allowed"), "50.00 MiB")
        self.assertEqual(r["calls_released"], [[0, 24 * MIB, 50 * MIB, 52 * MIB]])
        self.assertIn("an out-of-memory observer raised: observer failed", self.runs["oom"].stderr)
        self.assertTrue(r["thread_error"].startswith("CUDA out of memory. Tried to allocate 200.00 MiB."),
                        r["thread_error"])
        self.assertEqual(r["calls_thread"], [[0, 200 * MIB, 50 * MIB, 100 * MIB]])
        self.assertEqual(r["num_ooms_after"], 3)
        self.assertEqual(r["attach_no_arg"], "TypeError")


if __name__ == "__main__":
    harness.main(child)
