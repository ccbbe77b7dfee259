"""12. Allocator mode (MEMGUARD_ALLOCATOR=memguard) without a GPU.

Children (all under LD_PRELOAD):
  cpu         real (CPU-only) torch with MEMGUARD_ALLOCATOR=memguard: nothing breaks, CUDA is never
              initialized, one line says there is nothing to switch; results equal a run without it.
  bad         real torch with MEMGUARD_ALLOCATOR=pytorch: one warning, native kept.
  install     a stand-in `torch` package (fake_torch/, the pluggable-allocator surface of
              torch._C and torch.cuda.memory as PyTorch 2.11 has it, see below) and the fake CUDA
              runtime: memguard installs itself while `import torch` runs, hands PyTorch the
              addresses of its exported functions through every setter, and torch.cuda.memory's
              statistics and snapshots answer from memguard's allocator; graph trees' checkpoint
              entry points warn once, then fail as PyTorch's do.
  late        the same stand-in with its allocator already initialized: one line, nothing switched.
  rescue      no torch: the exported functions through ctypes (which releases the GIL, as
              PyTorch's operators do) with the fake runtime: blocks freed by a collection are
              marked gc=1, and an allocation that finds the device full of blocks held by
              reference cycles succeeds after memguard's one full collection (no O record).
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

MIB = 1 << 20

# The stand-in torch: what memguard's installation touches, with PyTorch's behaviour. The real
# torch._C._cuda_customAllocator(alloc, free) returns a _CUDAPluggableAllocator whose set_* methods
# take uint64 function addresses; _cuda_changeCurrentAllocator raises once CUDA initialized the
# allocator; the statistics and snapshot functions raise for a pluggable allocator.
FAKE_C = r'''
import os
INITIALIZED = os.environ.get("FAKE_TORCH_INITIALIZED") == "1"
created = []
current = None
calls = []

class _CUDAPluggableAllocator:
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

def _cuda_customAllocator(alloc, free):
    a = _CUDAPluggableAllocator(alloc, free)
    created.append(a)
    return a

def _cuda_changeCurrentAllocator(a):
    global current
    if INITIALIZED:
        raise RuntimeError("Can't swap an already initialized allocator")
    current = a

def _unsupported(what):
    def f(*args, **kwargs):
        calls.append(what)
        raise RuntimeError(f"CUDAPluggableAllocator does not yet support {what}")
    return f

_cuda_memoryStats = _unsupported("getDeviceStats")
_cuda_resetPeakMemoryStats = _unsupported("resetPeakStats")
_cuda_resetAccumulatedMemoryStats = _unsupported("resetAccumulatedStats")
_cuda_memorySnapshot = _unsupported("snapshot")
_cuda_record_memory_history = _unsupported("recordHistory")
_cuda_getCheckpointState = _unsupported("getCheckpointState")
'''

# torch/cuda/memory.py's statistics functions, as 2.11 writes them (flattening included).
FAKE_MEMORY = r'''
import torch

def memory_stats_as_nested_dict(device=0):
    return torch._C._cuda_memoryStats(device)

def memory_stats(device=0):
    result = []
    def _recurse(prefix, obj):
        if isinstance(obj, dict):
            if len(prefix) > 0:
                prefix += "."
            for k, v in obj.items():
                _recurse(prefix + k, v)
        else:
            result.append((prefix, obj))
    _recurse("", memory_stats_as_nested_dict(device))
    result.sort()
    return dict(result)

def memory_allocated(device=0):
    return memory_stats(device).get("allocated_bytes.all.current", 0)

def max_memory_allocated(device=0):
    return memory_stats(device).get("allocated_bytes.all.peak", 0)

def memory_reserved(device=0):
    return memory_stats(device).get("reserved_bytes.all.current", 0)

def reset_peak_memory_stats(device=0):
    return torch._C._cuda_resetPeakMemoryStats(device)

def _snapshot(device=None):
    return torch._C._cuda_memorySnapshot(None)
'''


def write_fake_torch(root):
    pkg = os.path.join(root, "torch")
    os.makedirs(os.path.join(pkg, "cuda"))
    files = {
        "__init__.py": "from . import _C\nfrom . import cuda\nfrom . import _late  # torch imports much more after torch.cuda\n",
        "_C.py": FAKE_C,
        "_late.py": "",
        os.path.join("cuda", "__init__.py"): "from . import memory\n",
        os.path.join("cuda", "memory.py"): FAKE_MEMORY,
    }
    for name, text in files.items():
        with open(os.path.join(pkg, name), "w") as f:
            f.write(text)


def memguard_lib():
    return ctypes.CDLL(os.environ["MGTEST_LIB_IN_CHILD"])


def address(lib, name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


def load_fake_cuda():
    """The fake runtime (RTLD_LOCAL, as PyTorch's loading makes it) and memguard's functions."""
    fake = ctypes.CDLL(os.environ["MGTEST_FAKE_CUDART_IN_CHILD"])
    lib = memguard_lib()
    lib.memguard_alloc.restype = ctypes.c_void_p
    lib.memguard_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    lib.memguard_free.restype = None
    lib.memguard_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    lib.memguard_allocator_init.argtypes = [ctypes.c_int]
    return fake, lib


def child(arm):
    import gc
    kind = arm["kind"]
    result = {}
    if kind in ("cpu", "bad"):
        import torch
        torch.manual_seed(0)
        w = torch.randn(32, 32, requires_grad=True)
        loss = (torch.tanh(torch.randn(8, 32) @ w) ** 2).mean()
        loss.backward()
        result["grad"] = float(w.grad.sum()).hex()
        result["cuda_initialized"] = torch.cuda.is_initialized()
        result["memory_allocated"] = torch.cuda.memory_allocated()
        return result
    if kind in ("install", "late"):
        root = os.path.join(os.getcwd(), "fake_torch")
        write_fake_torch(root)
        sys.path.insert(0, root)
        import torch
        lib = memguard_lib()
        want = {name: address(lib, sym) for name, sym in [
            ("init", "memguard_allocator_init"), ("reset", "memguard_allocator_empty_cache"),
            ("memory_fraction", "memguard_allocator_memory_fraction"),
            ("record_stream", "memguard_allocator_record_stream"),
            ("begin_pool", "memguard_allocator_begin_pool"), ("end_pool", "memguard_allocator_end_pool"),
            ("release_pool", "memguard_allocator_release_pool")]}
        c = torch._C
        result["created"] = len(c.created)
        result["installed"] = c.current is not None
        if c.created:
            a = c.created[0]
            result["alloc_ok"] = a.alloc == address(lib, "memguard_alloc")
            result["free_ok"] = a.free == address(lib, "memguard_free")
            result["hooks_ok"] = a.hooks == want
        result["stats_replaced"] = "memguard" in (getattr(c._cuda_memoryStats, "__doc__", "") or "")
        if kind == "late":
            return result
        fake, lib = load_fake_cuda()
        lib.memguard_allocator_init(1)
        mem = torch.cuda.memory
        p = lib.memguard_alloc(1000, 0, None)
        q = lib.memguard_alloc(3 * MIB, 0, None)
        result["after_alloc"] = [mem.memory_allocated(0), mem.max_memory_allocated(0), mem.memory_reserved(0)]
        lib.memguard_free(q, 3 * MIB, 0, None)
        result["after_free"] = [mem.memory_allocated(0), mem.max_memory_allocated(0)]
        mem.reset_peak_memory_stats(0)
        result["after_reset"] = [mem.memory_allocated(0), mem.max_memory_allocated(0)]
        lib.memguard_free(p, 1000, 0, None)
        stats = mem.memory_stats(0)
        result["num_device_alloc"] = stats.get("num_device_alloc")
        result["keys"] = sorted(k for k in stats if k.startswith("allocated_bytes.all."))
        result["snapshot_keys"] = sorted(mem._snapshot())  # answered by memguard (test_allocator_snapshot.py)
        errors = []
        for _ in range(2):
            try:
                c._cuda_getCheckpointState(0, (0, 1))
                errors.append("no error")
            except RuntimeError as e:
                errors.append(str(e))
        result["errors"] = errors
        return result
    if kind == "rescue":
        fake, lib = load_fake_cuda()
        lib.memguard_allocator_init(1)
        gc.disable()  # the cycles stay until someone collects

        class Holder:
            def __init__(self):
                self.p = make_block()
                self.me = self  # a reference cycle holds the block

            def __del__(self):
                lib.memguard_free(self.p, 24 * MIB, 0, None)

        def make_block():
            return lib.memguard_alloc(24 * MIB, 0, None)

        # A block freed by an explicit collection.
        h = Holder()
        result["cycle_block"] = h.p
        del h
        gc.collect()
        # Four blocks (96 of the fake device's 100 MiB) held by unreachable cycles.
        held = []
        for _ in range(4):
            h = Holder()
            held.append(h.p)
            del h
        result["held"] = held
        p = make_block()  # fails until the cycles are collected
        result["rescued_block"] = p
        result["collections_left"] = gc.collect()
        lib.memguard_free(p, 24 * MIB, 0, None)
        return result
    raise ValueError(kind)


def read_records(path, types):
    out = []
    with harness.open_report(path) as f:
        for line in f:
            w = line.rstrip("\n").split(" ")
            if w[0] in types:
                out.append(w)
    return out


class AllocatorMode(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        child_env = {"MGTEST_LIB_IN_CHILD": harness.lib_path(), "MGTEST_FAKE_CUDART_IN_CHILD": harness.fake_cudart_path()}
        mg = dict(child_env, MEMGUARD_ALLOCATOR="memguard")
        cls.runs = {
            "cpu": harness.run_child(__file__, {"kind": "cpu"}, env=mg),
            "cpu_plain": harness.run_child(__file__, {"kind": "cpu"}, preload=False),
            "bad": harness.run_child(__file__, {"kind": "bad"}, env=dict(child_env, MEMGUARD_ALLOCATOR="pytorch")),
            "install": harness.run_child(__file__, {"kind": "install"}, env=mg),
            "late": harness.run_child(__file__, {"kind": "late"}, env=dict(mg, FAKE_TORCH_INITIALIZED="1")),
            "native": harness.run_child(__file__, {"kind": "late"}, env=child_env),
            "rescue": harness.run_child(__file__, {"kind": "rescue"},
                                        env=dict(mg, FAKE_CUDA_CAPACITY=str(100 * MIB))),
        }

    def lines(self, run, needle):
        return [l for l in run.stderr.splitlines() if needle in l]

    def test_cpu_torch_runs_unchanged_and_says_why_once(self):
        run, plain = self.runs["cpu"], self.runs["cpu_plain"]
        self.assertChildOk(run)
        self.assertChildOk(plain)
        self.assertEqual(run.result, plain.result)
        self.assertFalse(run.result["cuda_initialized"])
        lines = self.lines(run, "MEMGUARD_ALLOCATOR")
        self.assertEqual(len(lines), 1, run.describe())
        self.assertIn("this PyTorch has no CUDA support", lines[0])

    def test_bad_value_warns_once_and_keeps_native(self):
        run = self.runs["bad"]
        self.assertChildOk(run)
        self.assertEqual(run.result, self.runs["cpu_plain"].result)
        lines = self.lines(run, "MEMGUARD_ALLOCATOR")
        self.assertEqual(len(lines), 1, run.describe())
        self.assertIn("MEMGUARD_ALLOCATOR='pytorch' is not valid", lines[0])
        self.assertIn("keeping native", lines[0])

    def test_install_hands_pytorch_every_exported_hook(self):
        run = self.runs["install"]
        self.assertChildOk(run)
        r = run.result
        self.assertEqual(r["created"], 1, run.describe())
        self.assertTrue(r["installed"])
        self.assertTrue(r["alloc_ok"] and r["free_ok"], r)
        self.assertTrue(r["hooks_ok"], r)
        self.assertTrue(r["stats_replaced"])
        self.assertIn("memguard is PyTorch's CUDA allocator", run.stderr)

    def test_stats_answer_from_memguard(self):
        r = self.runs["install"].result
        # 1000 bytes -> a 1024-byte block in a 2 MiB segment; 3 MiB -> a 3 MiB block of a 20 MiB one.
        self.assertEqual(r["after_alloc"], [1024 + 3 * MIB, 1024 + 3 * MIB, 22 * MIB])
        self.assertEqual(r["after_free"], [1024, 1024 + 3 * MIB])
        self.assertEqual(r["after_reset"], [1024, 1024])
        self.assertEqual(r["num_device_alloc"], 2)
        self.assertEqual(r["keys"], ["allocated_bytes.all.allocated", "allocated_bytes.all.current",
                                     "allocated_bytes.all.freed", "allocated_bytes.all.peak"])
        rep = self.runs["install"].need_report()
        self.assertEqual(rep.info.get("allocator"), "memguard")

    def test_graph_tree_checkpoints_warn_once_and_still_fail(self):
        run = self.runs["install"]
        errors = run.result["errors"]
        self.assertEqual(len(errors), 2)
        self.assertTrue(all("does not yet support" in e for e in errors), errors)
        self.assertEqual(len(self.lines(run, "CUDA graph trees")), 1, run.describe())
        # Snapshots are memguard's now: no warning, PyTorch's keys.
        self.assertEqual(self.lines(run, "memory snapshots"), [])
        self.assertEqual(run.result["snapshot_keys"],
                         ["allocator_settings", "device_traces", "external_annotations", "segments"])

    def test_already_initialized_allocator_stays(self):
        run = self.runs["late"]
        self.assertChildOk(run)
        self.assertFalse(run.result["installed"])
        self.assertFalse(run.result["stats_replaced"])
        lines = self.lines(run, "MEMGUARD_ALLOCATOR")
        self.assertEqual(len(lines), 1, run.describe())
        self.assertIn("already initialized", lines[0])
        self.assertIn("stays in interposition mode", lines[0])

    def test_native_mode_installs_nothing(self):
        run = self.runs["native"]
        self.assertChildOk(run)
        self.assertEqual(run.result["created"], 0)
        self.assertFalse(run.result["stats_replaced"])

    def test_collections_mark_frees_and_rescue_out_of_memory(self):
        run = self.runs["rescue"]
        self.assertChildOk(run)
        r = run.result
        self.assertTrue(r["rescued_block"], "the allocation succeeded after the rescue\n" + run.describe())
        self.assertEqual(r["collections_left"], 0, "the rescue collected the cycles")
        rep = run.need_report()
        # In order: the block freed by gc.collect(), the four freed by the rescue's collection (the
        # device reuses addresses), then the rescued block, freed outside any collection.
        frees = [(int(w[3], 16), w[4]) for w in read_records(rep.path, "t")]
        self.assertEqual([gc for _, gc in frees], ["1"] * 5 + ["0"], frees)
        self.assertEqual(sorted(a for a, _ in frees[:5]), sorted([r["cycle_block"]] + r["held"]))
        self.assertEqual(frees[5][0], r["rescued_block"])
        self.assertEqual(read_records(rep.path, "O"), [], "no out-of-memory event")
        # The allocations carry Python stacks naming the allocating function.
        blocks = read_records(rep.path, "T")
        self.assertEqual(len(blocks), 6)
        for w in blocks:
            py = int(w[9])
            self.assertNotEqual(py, 0)
            self.assertEqual(rep.python_stack(py)[0][0], "make_block")


if __name__ == "__main__":
    harness.main(child)
