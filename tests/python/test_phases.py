"""13. The memguard Python module: phases and marks from Python (report records B, b, J).

Allocations go through the fake CUDA runtime (loaded RTLD_LOCAL with ctypes, called through the
global scope, where libmemguard.so's cudaMalloc comes first), so that the report exists.
  api        `import memguard` (no file on sys.path); `with memguard.phase(...)`, nested; a phase
             begun before the first allocation; the decorator (return value, name, one phase per
             call); exceptions inside a phase and a decorated function (the phase still ends); one
             phase object entered by three threads at once; marks; active(), report_path(), flush()
  shadowing  an installed module named memguard on sys.path is imported as without memguard
             (memguard's stays reachable as _memguard); a bare directory named memguard does not
             shadow memguard's module
  no_cuda    phases and marks only: no report file
  no_preload / disabled: no module (ImportError)
"""
import os
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

MiB = 1 << 20


def child(arm):
    import threading

    kind = arm["kind"]
    result = {"tid": threading.get_native_id()}
    if kind in ("no_preload", "disabled"):
        try:
            import memguard  # noqa: F401
            result["imported"] = True
        except ImportError as e:
            result["imported"] = False
            result["error"] = type(e).__name__
        return result
    if kind == "shadowing":
        installed = tempfile.mkdtemp()
        with open(os.path.join(installed, "memguard.py"), "w") as f:
            f.write("REAL = True\n")
        sys.path.insert(0, installed)
        import memguard
        import _memguard
        result["installed_wins"] = getattr(memguard, "REAL", False)
        result["private_has_phase"] = hasattr(_memguard, "phase")
        del sys.modules["memguard"]
        sys.path.remove(installed)
        bare = tempfile.mkdtemp()
        os.mkdir(os.path.join(bare, "memguard"))  # a namespace package
        sys.path.insert(0, bare)
        import memguard as again
        result["bare_dir_shadows"] = not hasattr(again, "phase")
        result["same_object"] = again is _memguard
        return result

    import memguard
    import _memguard
    result["same_object"] = memguard is _memguard
    result["name"] = memguard.__name__
    result["has_file"] = hasattr(memguard, "__file__")
    result["all"] = sorted(memguard.__all__)
    result["active"] = memguard.active()
    result["path_before"] = memguard.report_path()
    result["flush_before"] = memguard.flush()
    with memguard.phase("load"):
        memguard.mark("before cuda")
    if kind == "no_cuda":
        with memguard.phase("cpu only"):
            memguard.mark("cpu mark")
        return result

    import ctypes
    ctypes.CDLL(arm["fake_cudart"])  # RTLD_LOCAL, as PyTorch loads the runtime
    glob = ctypes.CDLL(None)         # libmemguard.so's cudaMalloc first
    malloc, free = glob.cudaMalloc, glob.cudaFree
    malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    free.argtypes = [ctypes.c_void_p]

    def alloc(n):
        p = ctypes.c_void_p()
        rc = malloc(ctypes.byref(p), n)
        if rc != 0:
            raise RuntimeError(f"cudaMalloc: {rc}")
        return p

    with memguard.phase("call 0") as ph:
        result["enter_returns_phase"] = ph.name == "call 0"
        keep = alloc(1 * MiB)
        with memguard.phase("call 0/inner"):
            free(alloc(2 * MiB))

    @memguard.phase("decorated")
    def step(n):
        free(alloc(n))
        return n * 2

    result["decorated_ret"] = step(3 * MiB)
    step(4 * MiB)
    result["wrapped_name"] = step.__name__

    try:
        with memguard.phase("raises"):
            free(alloc(5 * MiB))
            raise ValueError("boom")
    except ValueError:
        result["raised"] = True

    @memguard.phase("decorated raises")
    def bad():
        raise KeyError("k")

    try:
        bad()
    except KeyError:
        result["decorated_raised"] = True

    shared = memguard.phase("shared")  # one object, entered by three threads at once
    barrier = threading.Barrier(3)
    tids = {}

    def worker(i):
        tids[i] = threading.get_native_id()
        with shared:
            barrier.wait()
            with memguard.phase(f"worker {i}"):
                free(alloc((6 + i) * MiB))
            barrier.wait()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result["worker_tids"] = [tids[i] for i in range(3)]

    # Real PyTorch (CPU) inside phases: a decorated forward, backward, a compiled call.
    import torch
    lin = torch.nn.Linear(16, 16)

    @memguard.phase("forward")
    def forward(x):
        return torch.tanh(lin(x)).sum()

    compiled = torch.compile(lambda x: torch.sin(x) * 2, backend="eager")
    with memguard.phase("train step"):
        forward(torch.randn(4, 16)).backward()
        with memguard.phase("compiled call"):
            result["compiled_ok"] = bool(torch.equal(compiled(torch.ones(3)), torch.sin(torch.ones(3)) * 2))
    result["grad_ok"] = lin.weight.grad is not None
    memguard.mark("step 3")
    memguard.mark(42)
    free(keep)
    result["path_after"] = memguard.report_path()
    result["flush_after"] = memguard.flush()
    return result


def _dec(s):
    return "" if s == "%" else urllib.parse.unquote(s)


class PhaseRecords:
    def __init__(self, path):
        self.records = []  # (type, fields) in file order: A, F, B, b, J
        with harness.open_report(path) as f:
            for line in f:
                w = line.rstrip("\n").split(" ")
                if w[0] in ("A", "F", "B", "b", "J"):
                    self.records.append(w)
        self.B = [(i, r) for i, r in enumerate(self.records) if r[0] == "B"]
        self.b = {r[3]: (i, r) for i, r in enumerate(self.records) if r[0] == "b"}
        self.J = [r for r in self.records if r[0] == "J"]

    def named(self, name):
        return [(i, r) for i, r in self.B if _dec(r[5]) == name]

    def one(self, name):
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} phases named {name!r}"
        return found[0]

    def allocs_in(self, name, same_thread=False):
        """Sizes of the A records inside each phase named `name` (made by the phase's thread)."""
        out = []
        for i, r in self.named(name):
            j = self.b[r[3]][0]
            out.append([int(a[4]) for a in self.records[i:j] if a[0] == "A" and (not same_thread or a[2] == r[2])])
        return out


class Phases(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        fake = harness.fake_cudart_path()
        cls.api = harness.run_child(__file__, {"kind": "api", "fake_cudart": fake})
        cls.shadowing = harness.run_child(__file__, {"kind": "shadowing"})
        cls.no_cuda = harness.run_child(__file__, {"kind": "no_cuda"})
        cls.no_preload = harness.run_child(__file__, {"kind": "no_preload"}, preload=False)
        cls.disabled = harness.run_child(__file__, {"kind": "disabled"}, env={"MEMGUARD_ENABLE": "0"})

    def test_module_is_memguards(self):
        run = self.api
        self.assertChildOk(run)
        r = run.result
        self.assertTrue(r["same_object"], "memguard is _memguard")
        self.assertEqual(r["name"], "memguard")
        self.assertFalse(r["has_file"], "no file behind the module")
        self.assertEqual(r["all"], ["Stats", "active", "flush", "mark", "phase", "report_path", "reset_peak", "stats", "step"])
        self.assertTrue(r["active"])
        self.assertIsNone(r["path_before"], "no report before the first allocation")
        self.assertFalse(r["flush_before"])
        rep = run.need_report()
        self.assertEqual(r["path_after"], rep.path)
        self.assertTrue(r["flush_after"])

    def test_phases_nest_and_hold_their_allocations(self):
        run = self.api
        self.assertChildOk(run)
        p = PhaseRecords(run.need_report().path)
        tid = str(run.result["tid"])
        for i, r in p.B:
            self.assertEqual(r[4], "api", r)
            self.assertIn(r[3], p.b, f"phase {_dec(r[5])} ended")
        self.assertEqual(len(p.b), len(p.B))
        load_i, load = p.one("load")
        first_a = min(i for i, r in enumerate(p.records) if r[0] == "A")
        self.assertLess(p.b[load[3]][0], first_a, "the phase before the first allocation is in the report")
        c0_i, c0 = p.one("call 0")
        in_i, inner = p.one("call 0/inner")
        self.assertLess(c0_i, in_i)
        self.assertLess(p.b[inner[3]][0], p.b[c0[3]][0])
        self.assertEqual(p.allocs_in("call 0"), [[1 * MiB, 2 * MiB]])
        self.assertEqual(p.allocs_in("call 0/inner"), [[2 * MiB]])
        self.assertEqual(c0[2], tid)
        ids = [int(r[3]) for _, r in p.B]
        self.assertEqual(len(set(ids)), len(ids))
        self.assertTrue(all(i > 0 for i in ids))

    def test_decorator_makes_a_phase_per_call(self):
        run = self.api
        self.assertChildOk(run)
        self.assertEqual(run.result["decorated_ret"], 6 * MiB)
        self.assertEqual(run.result["wrapped_name"], "step")
        p = PhaseRecords(run.need_report().path)
        self.assertEqual(p.allocs_in("decorated"), [[3 * MiB], [4 * MiB]])

    def test_exceptions_end_the_phase(self):
        run = self.api
        self.assertChildOk(run)
        self.assertTrue(run.result["raised"])
        self.assertTrue(run.result["decorated_raised"])
        p = PhaseRecords(run.need_report().path)
        self.assertEqual(p.allocs_in("raises"), [[5 * MiB]])
        _, r = p.one("decorated raises")
        self.assertIn(r[3], p.b)

    def test_threads_each_get_their_own_phase(self):
        run = self.api
        self.assertChildOk(run)
        p = PhaseRecords(run.need_report().path)
        tids = [str(t) for t in run.result["worker_tids"]]
        shared = p.named("shared")
        self.assertEqual(sorted(r[2] for _, r in shared), sorted(tids), "one phase per thread")
        for _, r in shared:
            self.assertEqual(p.b[r[3]][1][2], r[2], "ended on the thread that began it")
        # all three were open at once (the barrier)
        last_begin = max(i for i, _ in shared)
        first_end = min(p.b[r[3]][0] for _, r in shared)
        self.assertLess(last_begin, first_end)
        for i, tid in enumerate(tids):
            _, r = p.one(f"worker {i}")
            self.assertEqual(r[2], tid)
            self.assertEqual(p.allocs_in(f"worker {i}", same_thread=True), [[(6 + i) * MiB]])

    def test_torch_inside_phases(self):
        run = self.api
        self.assertChildOk(run)
        self.assertTrue(run.result["grad_ok"])
        self.assertTrue(run.result["compiled_ok"])
        p = PhaseRecords(run.need_report().path)
        step_i, step = p.one("train step")
        step_end = p.b[step[3]][0]
        for name in ("forward", "compiled call"):
            i, r = p.one(name)
            self.assertTrue(step_i < i < p.b[r[3]][0] < step_end, f"{name} inside train step")

    def test_marks(self):
        run = self.api
        self.assertChildOk(run)
        p = PhaseRecords(run.need_report().path)
        self.assertEqual([(r[3], _dec(r[4])) for r in p.J],
                         [("api", "before cuda"), ("api", "step 3"), ("api", "42")])

    def test_installed_package_wins_bare_directory_does_not(self):
        run = self.shadowing
        self.assertChildOk(run)
        self.assertTrue(run.result["installed_wins"], run.describe())
        self.assertTrue(run.result["private_has_phase"])
        self.assertFalse(run.result["bare_dir_shadows"], run.describe())
        self.assertTrue(run.result["same_object"])

    def test_phases_alone_write_no_report(self):
        run = self.no_cuda
        self.assertChildOk(run)
        self.assertTrue(run.result["active"])
        self.assertEqual(run.reports, [], run.describe())

    def test_no_module_without_memguard(self):
        for run in (self.no_preload, self.disabled):
            self.assertChildOk(run)
            self.assertFalse(run.result["imported"], run.describe())
            self.assertEqual(run.result["error"], "ModuleNotFoundError")


if __name__ == "__main__":
    harness.main(child)
