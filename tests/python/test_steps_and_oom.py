"""20. Steps, moments and out-of-memory context (issue 20), with real CPU torch.

On the CPU the tensors' data pointers are host pointers and torch has no CUDA, so the torch side's
device filter (memguard._torch's `device_of`, a documented seam) is replaced in the child to tag
host tensors as device 0; everything else is the production code. Allocations through the fake
CUDA runtime create the report (a moment needs one).

Children (all under LD_PRELOAD):
  steps      optimizer steps found with no code change: AdamW plain, foreach and fused, SGD with an
             LR scheduler, a subclass calling super().step() (after a base-class instance exists),
             a step that raises (the next still counts), memguard.step(): one s record each, in order
  tags       the step moment's tags equal the real tensors' storage bytes per category (parameters
             with their module names, gradients, AdamW state, buffers); the OOM observer called
             directly (as PyTorch calls it) writes h, g, d-less, x, k in order, flushed before it
             returns, with a non-parameter gradient and tensors saved by a graph kept alive by
             `total_loss += loss`; the one stderr line; a failing collector or a failing native
             never raises out of the observer
  budget     a fake clock: 100 ms steps, 5 ms moments: moments only while their time is within 1%
             of the time since the first step; every step still has its s record
  compile    torch.compile of a function calling opt.step(): its steps are counted and it gives
             no warning that a run without memguard does not give
  cuda_oom   a cudaMalloc the fake runtime refuses (its capacity): E, then x with the device's
             free and total bytes
  allocmode  allocator mode, memguard_alloc through ctypes until the fake device is full: O, then
             x (source allocator) flushed before the uncaught exception ends the process, and the
             stderr line; with torch loaded (allocmode_torch) the x sits in an OOM moment with tags
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

MIB = 1 << 20


def fake_cuda(arm):
    import ctypes
    ctypes.CDLL(arm["fake_cudart"])  # RTLD_LOCAL, as PyTorch loads the runtime
    glob = ctypes.CDLL(None)         # libmemguard.so's cudaMalloc first
    malloc = glob.cudaMalloc
    malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]

    def alloc(n):
        p = ctypes.c_void_p()
        rc = malloc(ctypes.byref(p), n)
        return rc, p.value
    return alloc


def torch_side(all_moments=True):
    import _memguard
    ns = _memguard._torch()
    assert ns is not None, "memguard's torch side is not installed"
    ns.device_of = lambda t: 0  # host tensors stand for CUDA ones (see the docstring)
    if all_moments:
        ns.budget = ns.Budget(fraction=1e12)
    return ns


def storage_key(t):
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


def child(arm):
    kind = arm["kind"]
    result = {}
    if kind in ("allocmode", "allocmode_torch"):
        import ctypes
        if kind == "allocmode_torch":
            import torch
            torch_side()
            keep = torch.nn.Linear(8, 8)  # noqa: F841 (a module to tag)
        ctypes.CDLL(arm["fake_cudart"])
        lib = ctypes.CDLL(arm["lib"])
        lib.memguard_alloc.restype = ctypes.c_void_p
        lib.memguard_alloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        lib.memguard_allocator_init.argtypes = [ctypes.c_int]
        lib.memguard_allocator_init(1)
        held = []
        for _ in range(10):  # 24 MiB blocks on a 100 MiB device: the fifth fails and throws
            held.append(lib.memguard_alloc(24 * MIB, 0, None))
            print("allocated", len(held), flush=True)
        return result

    import torch
    if kind == "compile" and not arm.get("preloaded"):
        return compile_child(torch, arm, result)
    alloc = fake_cuda(arm)
    if kind == "cuda_oom":
        result["first"] = alloc(48 * MIB)[0]
        result["second"] = alloc(32 * MIB)[0]
        return result
    import memguard
    result["first_alloc"] = alloc(MIB)[0]
    torch.manual_seed(0)

    if kind == "steps":
        torch_side()
        names = []
        w = torch.nn.Parameter(torch.randn(4, 4))

        def run(opt, n=2):
            for _ in range(n):
                (w * w).sum().backward()
                opt.step()
                opt.zero_grad()
                names.append(type(opt).__name__)

        run(torch.optim.AdamW([w], foreach=False))
        run(torch.optim.AdamW([w], foreach=True))
        try:
            run(torch.optim.AdamW([w], fused=True))
        except RuntimeError as e:  # fused not supported on this CPU build
            result["fused_error"] = str(e)
        sgd = torch.optim.SGD([w], lr=0.1, momentum=0.9)
        sched = torch.optim.lr_scheduler.StepLR(sgd, step_size=1)
        for _ in range(2):
            (w * w).sum().backward()
            sgd.step()
            sched.step()
            sgd.zero_grad()
            names.append("SGD")
        torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])  # patches Adam.step first

        class MyAdam(torch.optim.Adam):
            def step(self, closure=None):
                return super().step(closure)

        run(MyAdam([w]))

        class Boom(torch.optim.SGD):
            def step(self, closure=None):
                raise ValueError("boom")

        try:
            run(Boom([w], lr=0.1), 1)
        except ValueError:
            result["boom_raised"] = True
        run(torch.optim.SGD([w], lr=0.1), 1)
        memguard.step("manual")
        names.append("manual")
        result["names"] = names
        return result

    if kind == "switches":  # MEMGUARD_STEPS=0 MEMGUARD_EXPLAIN_OOM=0
        import _memguard
        ns = _memguard._torch()
        w = torch.nn.Parameter(torch.randn(4, 4))
        opt = torch.optim.SGD([w], lr=0.1)
        for _ in range(3):
            (w * w).sum().backward()
            opt.step()
        memguard.step("manual")
        optim = sys.modules["torch.optim.optimizer"]
        result["hooks"] = len(optim._global_optimizer_pre_hooks) + len(optim._global_optimizer_post_hooks)
        result["observer_queued"] = ns._observer_queued
        result["allocator_oom"] = ns.allocator_oom(0, 1, 1, 0, 0, 0, 0, 0, 0, 0)
        return result

    if kind == "tags":
        ns = torch_side()
        model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 3))
        opt = torch.optim.AdamW(model.parameters())
        leaf = torch.randn(1000, requires_grad=True)
        (leaf * 2).sum().backward()  # a leaf that is not a parameter, with a .grad
        result["nonparam_grad"] = storage_key(leaf.grad)
        for _ in range(2):
            model(torch.randn(8, 6)).sum().backward()
            opt.step()
        want = {"parameter": {}, "gradient": {}, "optimizer_state": {}, "buffer": {}}
        for name, p in model.named_parameters():
            want["parameter"][name] = storage_key(p)
            want["gradient"][name + ".grad"] = storage_key(p.grad)
        for st in opt.state.values():
            for k, v in st.items():
                want["optimizer_state"].setdefault("AdamW." + k, []).append(storage_key(v))
        for name, b in model.named_buffers():
            want["buffer"][name] = storage_key(b)
        result["want"] = {c: {k: v for k, v in d.items()} for c, d in want.items()}

        # The OOM observer, called as PyTorch calls it (device, rounded, limit, device free).
        result["file"] = __file__
        total_loss = 0
        for _ in range(3):
            total_loss += (model(torch.randn(8, 6)) ** 2).sum()  # graphs kept alive
        result["graph_alive"] = total_loss.grad_fn is not None
        path = memguard.report_path()
        ns.oom_observer(0, 2 * MIB, 1 << 30, 12345)
        with harness.open_report(path, arm["lib"]) as f:  # flushed: the x is in the file already
            result["x_in_file_after_observer"] = sum(1 for line in f if line.startswith("x "))

        def boom(*a, **k):
            raise RuntimeError("injected")

        saved = ns._collect_everything
        ns._collect_everything = boom
        ns.oom_observer(0, 4 * MIB, 1 << 30, 1)  # must not raise
        ns._collect_everything = saved
        ns._oom_context = boom
        ns.oom_observer(0, 8 * MIB, 1 << 30, 2)  # must not raise either
        result["survived"] = True
        return result

    if kind == "budget":
        ns = torch_side(all_moments=False)
        now = [10**12]
        ns.clock = lambda: now[0]
        ns.budget = ns.Budget(0.01)
        real_moment = ns.step_moment

        def costly_moment(*a):
            now[0] += 5_000_000  # every moment costs 5 ms
            return real_moment(*a)

        ns.step_moment = costly_moment
        w = torch.nn.Parameter(torch.randn(4))
        opt = torch.optim.SGD([w], lr=0.1)
        for _ in range(60):
            now[0] += 100_000_000  # a 100 ms step
            (w * w).sum().backward()
            opt.step()
        result["taken"], result["skipped"] = ns.budget.taken, ns.budget.skipped
        return result

    if kind == "compile":
        torch_side()
        return compile_child(torch, arm, result)
    raise ValueError(kind)


def compile_child(torch, arm, result):
    """A compiled function that calls opt.step(): the warnings it gives, and the steps counted."""
    import warnings
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)

    @torch.compile
    def train_step(x):
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            train_step(torch.randn(4, 8))
    result["warnings"] = sorted({f"{w.category.__name__}: {str(w.message)[:200]}" for w in caught})
    if arm.get("preloaded"):
        import _memguard
        result["steps"] = _memguard._steps()
    return result


def records(path, letters):
    out = []
    with harness.open_report(path) as f:
        for line in f:
            w = line.rstrip("\n").split(" ")
            if w[0] in letters:
                out.append(w)
    return out


def cli_path():
    return os.path.join(os.path.dirname(os.path.dirname(harness.lib_path())), "bin", "memguard")


class StepsAndOom(harness.ChildTestCase):
    def run_kind(self, kind, env=None, preload=True, **arm):
        arm = dict(arm, kind=kind, fake_cudart=harness.fake_cudart_path(), lib=harness.lib_path())
        return harness.run_child(__file__, arm, env=env, preload=preload, timeout=600)

    def assertReaderAccepts(self, path):
        """The real reader (the CLI's parser checks every field of every record) loads it."""
        r = subprocess.run([cli_path(), "summary", "--json", path], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, f"memguard summary refused {path}: {r.stderr}")
        json.loads(r.stdout)

    def test_steps(self):
        run = self.run_kind("steps")
        self.assertChildOk(run)
        rep = run.need_report()
        s = records(rep.path, "s")
        names = run.result["names"]
        self.assertEqual([w[5] for w in s], names, run.describe())
        self.assertEqual([int(w[3]) for w in s], list(range(1, len(names) + 1)))
        self.assertEqual([w[4] for w in s], ["optimizer"] * (len(names) - 1) + ["api"])
        self.assertTrue(run.result["boom_raised"])
        self.assertIn("MyAdam", names)
        # Every step got its moment (the budget is lifted here), each moment ends.
        h = records(rep.path, "h")
        k = records(rep.path, "k")
        self.assertEqual(len(h), len(names))
        self.assertEqual([w[3] for w in h], [w[2] for w in k])
        self.assertEqual([int(w[5]) for w in h], list(range(1, len(names) + 1)))
        self.assertReaderAccepts(rep.path)

    def test_tags_and_observer(self):
        run = self.run_kind("tags")
        self.assertChildOk(run)
        res = run.result
        rep = run.need_report()
        lines = records(rep.path, "shgdxk")
        # The second step's moment: the last h ... k before the first OOM moment.
        hs = [i for i, w in enumerate(lines) if w[0] == "h"]
        step_moments = [i for i in hs if lines[i][4] == "step"]
        self.assertEqual(len(step_moments), 2)
        start = step_moments[-1]
        moment = lines[start][3]
        tags = [w for w in lines[start:] if w[0] == "g" and w[1] == moment]
        got = {}
        for w in tags:
            got.setdefault(w[5], []).append((int(w[3], 16), int(w[4]), harness._dec(w[6]) if len(w) > 6 else None))
        for cat in ("parameter", "gradient", "buffer"):
            want = {name: tuple(v) for name, v in res["want"][cat].items()}
            have = {label: (addr, size) for addr, size, label in got[cat]}
            self.assertEqual(have, want, cat)
        state = {}
        for addr, size, label in got["optimizer_state"]:
            state.setdefault(label, []).append((addr, size))
        self.assertEqual({k: sorted(v) for k, v in state.items()},
                         {k: sorted(tuple(x) for x in v) for k, v in res["want"]["optimizer_state"].items()})
        # Bytes per category equal the real tensors' storage bytes.
        for cat in ("parameter", "gradient", "buffer"):
            self.assertEqual(sum(size for _, size, _ in got[cat]), sum(v[1] for v in res["want"][cat].values()))
        # The step moment found the stale .grad of a leaf that is not a parameter (its gc scan).
        self.assertEqual([(a, n) for a, n, _ in got.get("nonparam_gradient", [])], [tuple(res["nonparam_grad"])])

        # The OOM moments: h oom, g..., x, k, in that order, for each of the three observer calls.
        self.assertEqual(res["x_in_file_after_observer"], 1)
        self.assertTrue(res["survived"])
        oom_h = [i for i in hs if lines[i][4] == "oom"]
        self.assertEqual(len(oom_h), 3, run.describe())
        first = oom_h[0]
        mid = lines[first][3]
        end = next(i for i in range(first, len(lines)) if lines[i][0] == "k" and lines[i][2] == mid)
        seq = [w[0] for w in lines[first + 1:end + 1]]
        self.assertEqual(seq[-2:], ["x", "k"])
        self.assertEqual(set(seq[:-2]), {"g"})
        x = [w for w in lines if w[0] == "x"][0]
        self.assertEqual((x[3], x[4], x[5], x[6], x[7], x[8]), ("0", "torch", "-", str(2 * MIB), str(1 << 30), "12345"))
        self.assertEqual(x[14], mid)  # the x names its moment
        self.assertNotEqual(x[12], "0", "the x carries the request's native stack")
        self.assertNotEqual(x[13], "0", "the x carries the request's Python stack")
        cats = {}
        for w in lines[first:]:
            if w[0] == "g" and w[1] == mid:
                cats.setdefault(w[5], set()).add(int(w[3], 16))
        self.assertIn(res["nonparam_grad"][0], cats.get("nonparam_gradient", set()))
        self.assertTrue(cats.get("activation"), f"no tensors saved for backward were tagged: {sorted(cats)}")
        # Saved tensors name their node and the variable that keeps their graph alive.
        labels = {harness._dec(w[6]) for w in lines[first:] if w[0] == "g" and w[1] == mid and w[5] == "activation"}
        kept = [l for l in labels if "(kept by total_loss at " + res["file"] + ":" in l]
        self.assertTrue(kept and all(l.startswith("saved by ") for l in kept), sorted(labels))
        self.assertFalse(cats["activation"] & cats["parameter"], "a parameter was tagged as an activation")
        k = [w for w in lines if w[0] == "k" and w[2] == mid][0]
        self.assertEqual(k[5], "1")
        # The injected failures: the second moment is partial (k complete 0), the third has no x.
        k2 = [w for w in lines if w[0] == "k" and w[2] == lines[oom_h[1]][3]][0]
        self.assertEqual(k2[5], "0")
        self.assertEqual(len([w for w in lines if w[0] == "x"]), 2)
        # One stderr line for the process, naming the report.
        notices = [ln for ln in run.stderr.splitlines() if "CUDA out of memory on device" in ln]
        self.assertEqual(notices, [f"memguard: CUDA out of memory on device 0: memguard oom {rep.path}"])
        self.assertIn("injected", run.stderr)  # logged once through memguard's logger
        self.assertReaderAccepts(rep.path)

    def test_switches_off(self):
        run = self.run_kind("switches", env={"MEMGUARD_STEPS": "0", "MEMGUARD_EXPLAIN_OOM": "0"})
        self.assertChildOk(run)
        rep = run.need_report()
        # No optimizer hooks: only memguard.step() counts; no observer; allocator mode's x is native.
        self.assertEqual([(w[4], w[5]) for w in records(rep.path, "s")], [("api", "manual")], run.describe())
        self.assertEqual(run.result["hooks"], 0)
        self.assertFalse(run.result["allocator_oom"])
        self.assertNotIn("MEMGUARD_STEPS", run.stderr)  # the values are accepted
        self.assertReaderAccepts(rep.path)

    def test_budget(self):
        run = self.run_kind("budget")
        self.assertChildOk(run)
        # The rule, independently: time advances 100 ms before each step, each moment costs 5 ms;
        # the budget starts at the first step's pre hook.
        now, start, spent, taken_at = 10**12, None, 0, []
        for i in range(1, 61):
            now += 100_000_000
            if start is None:
                start = now
            if not taken_at or spent <= 0.01 * (now - start):
                taken_at.append(i)
                spent += 5_000_000
                now += 5_000_000
        rep = run.need_report()
        self.assertEqual(len(records(rep.path, "s")), 60)
        h = records(rep.path, "h")
        self.assertEqual([int(w[5]) for w in h], taken_at)
        self.assertEqual(run.result["taken"], len(taken_at))
        self.assertEqual(run.result["skipped"], 60 - len(taken_at))
        # Within 1% of the run's time, give or take the one moment that went over.
        self.assertLessEqual(5_000_000 * (len(taken_at) - 1), 0.01 * (now - start))
        self.assertGreater(len(taken_at), 3)

    def test_compile_gives_no_new_warnings(self):
        with_mg = self.run_kind("compile", preloaded=True)
        self.assertChildOk(with_mg)
        without = self.run_kind("compile", preload=False)
        self.assertChildOk(without)
        self.assertEqual(with_mg.result["warnings"], without.result["warnings"], with_mg.describe())
        self.assertEqual(with_mg.result["steps"], 3)
        self.assertEqual(len(records(with_mg.need_report().path, "s")), 3)

    def test_cuda_oom(self):
        run = self.run_kind("cuda_oom", env={"FAKE_CUDA_CAPACITY": str(64 * MIB)})
        self.assertChildOk(run)
        self.assertEqual((run.result["first"], run.result["second"]), (0, 2))
        rep = run.need_report()
        lines = records(rep.path, "Ex")
        self.assertEqual([w[0] for w in lines], ["E", "x"])
        x = lines[1]
        self.assertEqual(x[4], "cuda")
        self.assertEqual((x[5], x[6]), (str(32 * MIB), str(32 * MIB)))
        self.assertEqual((x[8], x[9]), (str(16 * MIB), str(64 * MIB)))  # free, total
        self.assertEqual(x[14], "0")  # no moment
        self.assertNotIn("CUDA out of memory on device", run.stderr)  # PyTorch may retry: no line
        self.assertReaderAccepts(rep.path)

    def check_allocmode(self, kind):
        run = self.run_kind(kind, env={"MEMGUARD_ALLOCATOR": "memguard", "FAKE_CUDA_CAPACITY": str(100 * MIB)})
        self.assertNotEqual(run.rc, 0, "the OOM should end the child (an exception through ctypes)")
        self.assertIn("allocated 4", run.stdout)
        self.assertNotIn("allocated 5", run.stdout)
        rep = run.need_report()  # flushed before the exception ended the process
        lines = records(rep.path, "Ohgxk")
        letters = [w[0] for w in lines]
        self.assertIn("O", letters, run.describe())
        x = [w for w in lines if w[0] == "x"]
        self.assertEqual(len(x), 1, run.describe())
        self.assertEqual(x[0][4], "allocator")
        self.assertEqual(x[0][5], str(24 * MIB))
        self.assertEqual(x[0][9], str(100 * MIB))
        self.assertLess(letters.index("O"), letters.index("x"))
        notices = [ln for ln in run.stderr.splitlines() if "CUDA out of memory on device" in ln]
        self.assertEqual(notices, [f"memguard: CUDA out of memory on device 0: memguard oom {rep.path}"])
        return lines, x[0]

    def test_allocator_mode_x(self):
        lines, x = self.check_allocmode("allocmode")
        self.assertEqual(x[14], "0")  # no torch: no moment

    def test_allocator_mode_moment(self):
        lines, x = self.check_allocmode("allocmode_torch")
        self.assertNotEqual(x[14], "0")
        mid = x[14]
        h = [w for w in lines if w[0] == "h" and w[3] == mid]
        self.assertEqual(h[0][4], "oom")
        tags = [w for w in lines if w[0] == "g" and w[1] == mid]
        self.assertTrue(any(w[5] == "parameter" for w in tags), lines)
        self.assertEqual([w[0] for w in lines if w[0] in "xk"][-2:], ["x", "k"])


if __name__ == "__main__":
    harness.main(child)
