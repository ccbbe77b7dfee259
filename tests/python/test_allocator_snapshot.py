"""Allocator mode's snapshots and memory history (MEMGUARD_ALLOCATOR=memguard) without a GPU.

Children:
  record  under LD_PRELOAD, the stand-in `torch` of test_allocator_mode.py (torch._C's pluggable
          allocator surface as PyTorch 2.11 has it, plus its memory-history entry points and
          torch.cuda.memory's _record_memory_history / _snapshot / _dump_snapshot /
          memory_snapshot as 2.11 writes them) over the fake CUDA runtime: memguard replaces the
          entry points, records a history of allocations made from Python, and dumps it.
  viz     real (CPU) torch, no preload: torch.cuda._memory_viz on memguard's dump and on the native
          golden (tests/python/golden/native_dump_2.11.pickle, written by PyTorch 2.11's own
          allocator on an H200): every view renders for both.

The snapshot's keys and value types are compared with the native golden's.
"""
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_allocator_mode as base  # noqa: E402

MIB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE_GOLDEN = os.path.join(HERE, "golden", "native_dump_2.11.pickle")

FAKE_C_HISTORY = r'''
def _cuda_record_memory_history_legacy(*args, **kwargs):
    calls.append("recordHistoryLegacy")
    raise RuntimeError("CUDAPluggableAllocator does not yet support recordHistory")

def _cuda_isHistoryEnabled():
    raise RuntimeError("CUDAPluggableAllocator does not yet support isHistoryEnabled")

def _cuda_setMemoryMetadata(metadata):
    pass  # the pluggable allocator's default: nothing kept

def _cuda_getMemoryMetadata():
    return ""
'''

# torch/cuda/memory.py's history functions, as 2.11 writes them.
FAKE_MEMORY_HISTORY = r'''
import pickle
import sys

def memory_snapshot(mempool_id=None):
    return torch._C._cuda_memorySnapshot(mempool_id)["segments"]

def _record_memory_history(enabled="all", *args, **kwargs):
    if isinstance(enabled, bool):
        return _record_memory_history_legacy(enabled, *args, **kwargs)
    return _record_memory_history_impl(enabled, *args, **kwargs)

def _record_memory_history_legacy(enabled, record_context=True, trace_alloc_max_entries=1,
                                  trace_alloc_record_context=False, device=None, record_context_cpp=False,
                                  clear_history=False, compile_context=False, global_record_annotations=False,
                                  skip_actions=None):
    torch._C._cuda_record_memory_history_legacy(
        enabled, record_context, trace_alloc_max_entries, trace_alloc_record_context, record_context_cpp,
        clear_history, compile_context, global_record_annotations,
        skip_actions if skip_actions is not None else [])

def _record_memory_history_impl(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                                device=None, clear_history=False, compile_context=False,
                                global_record_annotations=False, skip_actions=None):
    torch._C._cuda_record_memory_history(
        enabled, context, stacks, max_entries, clear_history, compile_context, global_record_annotations,
        skip_actions if skip_actions is not None else [])

def _set_memory_metadata(metadata):
    torch._C._cuda_setMemoryMetadata(metadata)

def _get_memory_metadata():
    return torch._C._cuda_getMemoryMetadata()

def _dump_snapshot(filename="dump_snapshot.pickle", augment_with_fx_traces=False):
    s = _snapshot()
    with open(filename, "wb") as f:
        pickle.dump(s, f)
'''


def write_fake_torch(root):
    base.write_fake_torch(root)
    with open(os.path.join(root, "torch", "_C.py"), "a") as f:
        f.write(FAKE_C_HISTORY)
    with open(os.path.join(root, "torch", "cuda", "memory.py"), "a") as f:
        f.write(FAKE_MEMORY_HISTORY)


def schema(snap):
    """The keys and value types of a snapshot, by kind of dict (trace entries by action)."""
    out = {"snapshot": {k: type(v).__name__ for k, v in snap.items()}}

    def add(kind, d):
        out.setdefault(kind, {}).update({k: type(v).__name__ for k, v in d.items()})

    for seg in snap["segments"]:
        add("segment", seg)
        for b in seg["blocks"]:
            add("block", b)
            for fr in b["frames"]:
                add("frame", fr)
    for trace in snap["device_traces"]:
        for e in trace:
            add("trace:" + ("with_frames" if "frames" in e else "without_frames"), e)
    add("allocator_settings", snap["allocator_settings"])
    return out


def child(arm):
    kind = arm["kind"]
    if kind == "viz":
        import torch.cuda._memory_viz as mv
        out = {}
        for name, path in (("memguard", arm["dump"]), ("native", NATIVE_GOLDEN)):
            with open(path, "rb") as f:
                snap = pickle.load(f)
            r = {}
            html = mv.trace_plot(snap)
            r["trace_plot"] = [len(html), "<html" in html.lower() or "<!doctype" in html.lower()]
            html = mv.segment_plot(snap)
            r["segment_plot"] = [len(html), "<html" in html.lower() or "<!doctype" in html.lower()]
            r["memory"] = mv.memory(snap, format_flamegraph=lambda lines: lines)
            r["segments"] = mv.segments(snap, format_flamegraph=lambda lines: lines)
            r["compare"] = len(mv.compare([], snap["segments"], format_flamegraph=lambda lines: lines))  # all new
            r["segsum"] = mv.segsum(snap)
            r["trace"] = mv.trace(snap)
            out[name] = r
        return out

    root = os.path.join(os.getcwd(), "fake_torch")
    write_fake_torch(root)
    sys.path.insert(0, root)
    import torch
    fake, lib = base.load_fake_cuda()
    lib.memguard_allocator_init(1)
    mem = torch.cuda.memory
    c = torch._C
    result = {"replaced": {n: "memguard" in (getattr(c, n).__doc__ or "") for n in (
        "_cuda_memorySnapshot", "_cuda_record_memory_history", "_cuda_record_memory_history_legacy",
        "_cuda_isHistoryEnabled", "_cuda_setMemoryMetadata", "_cuda_getMemoryMetadata")}}

    def alloc_tensor(n):
        return lib.memguard_alloc(n, 0, None)  # the allocating line

    def free_tensor(p, n):
        lib.memguard_free(p, n, 0, None)  # the freeing line

    result["plain"] = mem._snapshot()  # no history: segments, no trace
    before = alloc_tensor(1000)
    result["enabled_before"] = c._cuda_isHistoryEnabled()
    mem._record_memory_history(max_entries=100000)
    result["enabled_after"] = c._cuda_isHistoryEnabled()
    p = alloc_tensor(1000)
    mem._set_memory_metadata("step 7")  # the entries from here on carry it
    result["metadata"] = mem._get_memory_metadata()
    q = alloc_tensor(3 * MIB)
    mem._set_memory_metadata("")
    result["metadata_cleared"] = mem._get_memory_metadata()
    free_tensor(q, 3 * MIB)
    try:
        c._cuda_setMemoryMetadata(7)
        result["metadata_bad"] = "no error"
    except TypeError:
        result["metadata_bad"] = "TypeError"
    dump = os.path.join(os.getcwd(), "dump.pickle")
    mem._dump_snapshot(dump)
    result["dump"] = dump
    with open(dump, "rb") as f:
        snap = pickle.load(f)
    result["schema"] = schema(snap)
    result["actions"] = [e["action"] for e in snap["device_traces"][0]]
    result["user_metadata"] = [e["user_metadata"] for e in snap["device_traces"][0]]
    result["entries"] = [{k: v for k, v in e.items() if k in ("action", "addr", "size")} for e in snap["device_traces"][0]]
    # Python frames (a .py file) and native ones (stacks='all': before them, innermost first).
    result["frames"] = {e["action"] + ":" + str(e["addr"]): [f["name"] for f in e.get("frames", [])
                                                             if f["filename"].endswith(".py")]
                        for e in snap["device_traces"][0]}
    result["native_first"] = {e["action"] + ":" + str(e["addr"]): [f["filename"].endswith(".py")
                                                                   for f in e.get("frames", [])]
                              for e in snap["device_traces"][0]}
    result["lines"] = {e["action"] + ":" + str(e["addr"]): [f["line"] for f in e.get("frames", [])
                                                            if f["name"] in ("alloc_tensor", "free_tensor")]
                       for e in snap["device_traces"][0]}
    result["pointers"] = {"before": before, "p": p, "q": q}
    result["blocks"] = [{"address": b["address"], "state": b["state"], "size": b["size"],
                         "requested_size": b["requested_size"],
                         "frames": [f["name"] for f in b["frames"] if f["filename"].endswith(".py")]}
                        for seg in snap["segments"] for b in seg["blocks"]]
    result["segments"] = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in seg.items()
                           if k not in ("blocks", "frames")} for seg in snap["segments"]]
    result["memory_snapshot"] = len(mem.memory_snapshot())
    # 'state': stacks of live blocks, a ring of one entry; None: off, the trace dropped.
    mem._record_memory_history("state")
    free_tensor(p, 1000)
    result["state_trace"] = [e["action"] for e in mem._snapshot()["device_traces"][0]]
    mem._record_memory_history(None)
    result["off_trace"] = mem._snapshot()["device_traces"][0]
    result["enabled_off"] = c._cuda_isHistoryEnabled()
    # The legacy form, a smaller ring, skipped actions.
    mem._record_memory_history(True, trace_alloc_max_entries=3, trace_alloc_record_context=True)
    for _ in range(3):
        free_tensor(alloc_tensor(512), 512)
    result["legacy_trace"] = [e["action"] for e in mem._snapshot()["device_traces"][0]]
    mem._record_memory_history("all", clear_history=True, skip_actions=["free_requested", "snapshot"])
    free_tensor(alloc_tensor(512), 512)
    result["skip_trace"] = [e["action"] for e in mem._snapshot()["device_traces"][0]]
    errors = []
    for call in (lambda: mem._record_memory_history("everything"),
                 lambda: mem._record_memory_history("all", context="some"),
                 lambda: mem._record_memory_history("all", stacks="cpp"),
                 lambda: mem._record_memory_history("all", skip_actions=["nope"])):
        try:
            call()
            errors.append("no error")
        except RuntimeError as e:
            errors.append(str(e))
    result["errors"] = errors
    mem._record_memory_history(None)
    free_tensor(before, 1000)
    return result


class AllocatorSnapshot(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        env = {"MGTEST_LIB_IN_CHILD": harness.lib_path(), "MGTEST_FAKE_CUDART_IN_CHILD": harness.fake_cudart_path(),
               "MEMGUARD_ALLOCATOR": "memguard"}
        cls.run_ = harness.run_child(__file__, {"kind": "record"}, env=env)
        cls.viz = None
        if cls.run_.result:
            cls.viz = harness.run_child(__file__, {"kind": "viz", "dump": cls.run_.result["dump"]}, preload=False)

    def setUp(self):
        self.assertChildOk(self.run_)
        self.r = self.run_.result

    def test_entry_points_replaced(self):
        self.assertEqual(self.r["replaced"], dict.fromkeys(self.r["replaced"], True))
        self.assertNotIn("memory snapshots and memory history", self.run_.stderr)

    def test_keys_and_types_match_pytorchs_native_snapshot(self):
        with open(NATIVE_GOLDEN, "rb") as f:
            native = schema(pickle.load(f))
        mine = self.r["schema"]
        # The golden's trace has entries with and without frames (snapshot entries carry none).
        for kind in ("snapshot", "segment", "block", "frame", "allocator_settings", "trace:with_frames",
                     "trace:without_frames"):
            self.assertEqual(mine.get(kind), native.get(kind), kind)

    def test_user_metadata_is_carried_by_later_entries(self):
        # torch.cuda.memory._set_memory_metadata: the entries recorded while it is set carry it
        # (the 3 MiB allocation and its segment), as PyTorch's; "" clears it.
        self.assertEqual(self.r["metadata"], "step 7")
        self.assertEqual(self.r["metadata_cleared"], "")
        self.assertEqual(self.r["metadata_bad"], "TypeError")
        self.assertEqual(list(zip(self.r["actions"], self.r["user_metadata"])), [
            ("alloc", ""), ("segment_alloc", "step 7"), ("alloc", "step 7"), ("free_requested", ""),
            ("free_completed", ""), ("snapshot", "")])

    def test_plain_snapshot_without_history(self):
        plain = self.r["plain"]
        self.assertEqual(plain["device_traces"], [[]])
        self.assertEqual(plain["segments"], [])

    def test_trace_records_allocations_and_frees_with_python_frames(self):
        ptr = self.r["pointers"]
        self.assertEqual(self.r["actions"], ["alloc", "segment_alloc", "alloc", "free_requested", "free_completed",
                                             "snapshot"])
        e = self.r["entries"]
        self.assertEqual(e[0], {"action": "alloc", "addr": ptr["p"], "size": 1000})
        self.assertEqual(e[1]["size"], 20 * MIB)
        self.assertEqual(e[2], {"action": "alloc", "addr": ptr["q"], "size": 3 * MIB})
        self.assertEqual(e[3], {"action": "free_requested", "addr": ptr["q"], "size": 3 * MIB})
        self.assertEqual(e[5]["size"], 2048)  # the active blocks: before and p
        frames = self.r["frames"]
        self.assertEqual(frames[f"alloc:{ptr['p']}"][:2], ["alloc_tensor", "child"])
        self.assertEqual(frames[f"free_requested:{ptr['q']}"][:2], ["free_tensor", "child"])  # the free's own
        self.assertEqual(frames["snapshot:0"], [])
        # stacks='all': the native frames of the allocation first (memguard_alloc, through ctypes).
        kinds = self.r["native_first"][f"alloc:{ptr['p']}"]
        self.assertFalse(kinds[0], "a native frame first")
        self.assertEqual(kinds, sorted(kinds), "native frames, then Python frames")
        # The line numbers are those of the allocating and freeing lines.
        with open(__file__) as f:
            src = f.read().splitlines()
        (alloc_line,) = self.r["lines"][f"alloc:{ptr['p']}"]
        (free_line,) = self.r["lines"][f"free_requested:{ptr['q']}"]
        self.assertIn("# the allocating line", src[alloc_line - 1])
        self.assertIn("# the freeing line", src[free_line - 1])

    def test_blocks_and_segments(self):
        ptr = self.r["pointers"]
        by_addr = {b["address"]: b for b in self.r["blocks"]}
        self.assertEqual(by_addr[ptr["p"]]["state"], "active_allocated")
        self.assertEqual(by_addr[ptr["p"]]["requested_size"], 1000)
        self.assertEqual(by_addr[ptr["p"]]["frames"][:2], ["alloc_tensor", "child"])
        # Allocated before the history began: no frames, as PyTorch.
        self.assertEqual(by_addr[ptr["before"]]["frames"], [])
        self.assertEqual(by_addr[ptr["q"]]["state"], "inactive")
        small = [s for s in self.r["segments"] if s["segment_type"] == "small"]
        self.assertEqual(len(small), 1)
        self.assertEqual(small[0]["allocated_size"], 2048)
        self.assertEqual(small[0]["requested_size"], 2000)
        self.assertEqual(small[0]["segment_pool_id"], [0, 0])
        self.assertEqual(self.r["memory_snapshot"], 2)

    def test_history_modes(self):
        r = self.r
        self.assertEqual([r["enabled_before"], r["enabled_after"], r["enabled_off"]], [False, True, False])
        self.assertEqual(r["state_trace"], ["snapshot"])  # 'state': a ring of one
        self.assertEqual(r["off_trace"], [])
        self.assertEqual(r["legacy_trace"], ["free_requested", "free_completed", "snapshot"])
        self.assertEqual(r["skip_trace"], ["alloc", "free_completed"])
        self.assertEqual(r["errors"], ["expected state to be 'state', 'all', or None",
                                       "expected context to be 'state', 'alloc', 'all', or None",
                                       "expected stacks to be 'python', or 'all'",
                                       "Invalid action in skip_actions: nope"])

    def test_memory_viz_renders_memguards_dump_as_the_native_one(self):
        self.assertChildOk(self.viz)
        mine, native = self.viz.result["memguard"], self.viz.result["native"]
        for r in (mine, native):
            self.assertTrue(r["trace_plot"][1] and r["segment_plot"][1], r)
            self.assertGreater(r["trace_plot"][0], 1000)
        # The flamegraph input: one line per block with its frames ("a;b;c size").
        self.assertIn("alloc_tensor", mine["memory"])
        self.assertTrue(native["memory"] and mine["segments"] and native["segments"])
        self.assertGreater(mine["compare"], 0)
        self.assertIn("segments", mine["segsum"].lower() + native["segsum"].lower())
        self.assertTrue(mine["trace"] and native["trace"])


if __name__ == "__main__":
    harness.main(child)
