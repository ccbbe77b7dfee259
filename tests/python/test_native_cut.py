"""16. Native stacks under a Python caller end at the interpreter (MEMGUARD_NATIVE_BELOW_PYTHON).

Only where memguard reads Python frames without the GIL (CPython 3.11 to 3.13): elsewhere a
thread running PyTorch's operators (which release the GIL) gets no Python stack, so nothing is cut.

With Python stacks on, a native stack taken while Python code runs ends at its first frame inside
the interpreter (the object that defines PyEval_GetFrame: the python executable or libpython);
that frame is kept, the interpreter's frames below it are not unwound. memguard asks libunwind for
as many frames as the thread's last stack needed to reach the interpreter; a stack that goes
deeper than that guess must be unwound again in full, so it loses nothing.

The child calls cudaMalloc (fake runtime) through nested_alloc.cpp, which adds `depth` native
frames, from Python with the GIL released (ctypes.CDLL), in the order 2, 40 (deeper than the guess
the first call left), 2, 0, then 40 from a second Python thread. Arms:
  cut        defaults: every stack ends at its first interpreter frame and keeps all `depth` frames
  full       MEMGUARD_NATIVE_BELOW_PYTHON=1: stacks go on below the first interpreter frame
  nopython   MEMGUARD_PYTHON_STACKS=0: no Python stacks, so no cut either
"""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

CALLS = [("main", 2), ("main", 40), ("main", 2), ("main", 0), ("thread", 40)]


def size_of(i):
    return (1 << 20) + 4096 * (i + 1)


def child(arm):
    import ctypes

    ctypes.CDLL(arm["fake_cudart"])
    lib = ctypes.CDLL(arm["nested"])
    lib.mgtest_nested_cuda_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_int]
    rcs = {}

    def alloc(i, depth):
        p = ctypes.c_void_p()
        rcs[i] = lib.mgtest_nested_cuda_malloc(ctypes.byref(p), size_of(i), depth)

    for i, (where, depth) in enumerate(CALLS):
        if where == "main":
            alloc(i, depth)
        else:
            t = threading.Thread(target=alloc, args=(i, depth))
            t.start()
            t.join()
    return {"rcs": rcs, "python": list(sys.version_info[:2]), "interpreter_fn": ctypes.cast(ctypes.pythonapi.PyEval_GetFrame, ctypes.c_void_p).value,
            "nested_fn": ctypes.cast(lib.mgtest_nested_cuda_malloc, ctypes.c_void_p).value}


def stacks_and_modules(path):
    stacks, modules = {}, []
    with harness.open_report(path) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "S":
                stacks[int(w[1])] = [int(x, 16) for x in w[2:]]
            elif w and w[0] == "M":
                modules.append((int(w[2], 16), int(w[3], 16), w[-1]))
    return stacks, modules


class NativeCut(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        nested = os.environ.get("MGTEST_NESTED_ALLOC")
        if not nested or not os.path.isfile(nested):
            raise RuntimeError("MGTEST_NESTED_ALLOC must name the nested_alloc test library")
        arm = {"fake_cudart": harness.fake_cudart_path(), "nested": nested}
        cls.runs = {
            "cut": harness.run_child(__file__, arm),
            "full": harness.run_child(__file__, arm, env={"MEMGUARD_NATIVE_BELOW_PYTHON": "1"}),
            "nopython": harness.run_child(__file__, arm, env={"MEMGUARD_PYTHON_STACKS": "0"}),
        }

    def frames(self, name):
        """Per call: (ips, index of the first interpreter frame or None, frames in nested_alloc)."""
        run = self.runs[name]
        self.assertChildOk(run)
        self.assertTrue(all(rc == 0 for rc in run.result["rcs"].values()), run.result)
        rep = run.need_report()
        stacks, modules = stacks_and_modules(rep.path)

        def module_of(addr):
            for lo, hi, path in modules:
                if lo <= addr < hi:
                    return (lo, hi, path)
            self.fail(f"{name}: no M record covers {addr:#x}\n" + run.describe())

        interp = module_of(run.result["interpreter_fn"])
        nested = module_of(run.result["nested_fn"])
        out = []
        for i in range(len(CALLS)):
            a = [a for a in rep.A if a["size"] == size_of(i)]
            self.assertEqual(len(a), 1, f"{name}: call {i}: one A record\n" + run.describe())
            ips = stacks[a[0]["stack_id"]]
            first = next((k for k, ip in enumerate(ips) if interp[0] <= ip < interp[1]), None)
            in_nested = sum(1 for ip in ips if nested[0] <= ip < nested[1])
            out.append((ips, first, in_nested))
        return out

    def walker(self):
        return tuple(self.runs["cut"].result["python"]) in ((3, 11), (3, 12), (3, 13))

    def test_cut_ends_every_stack_at_the_interpreter_and_keeps_the_frames_above(self):
        if not self.walker():
            # No GIL-free walker: no Python stack for a GIL-released call, so no cut either.
            return self.assert_not_cut("cut")
        for i, (ips, first, in_nested) in enumerate(self.frames("cut")):
            where, depth = CALLS[i]
            self.assertIsNotNone(first, f"call {i} ({where}, depth {depth}): no interpreter frame: {ips}")
            self.assertEqual(first, len(ips) - 1, f"call {i}: the stack goes on below the interpreter: {ips}")
            # The recursion's frames (its last call and the entry point's are tail calls): none
            # lost, even where the thread's previous stack was 38 frames shallower.
            self.assertGreaterEqual(in_nested, depth, f"call {i} ({where}, depth {depth}): {ips}")

    def test_full_keeps_the_frames_below_the_interpreter(self):
        if not self.walker():
            return self.assert_not_cut("full")
        cut = self.frames("cut")
        for i, (ips, first, in_nested) in enumerate(self.frames("full")):
            self.assertIsNotNone(first, f"call {i}: no interpreter frame: {ips}")
            self.assertGreater(len(ips) - first, 3, f"call {i}: too few frames below the interpreter: {ips}")
            self.assertGreater(len(ips), len(cut[i][0]), f"call {i}: not longer than the cut stack")
            self.assertEqual(in_nested, cut[i][2])
            self.assertEqual(first, cut[i][1], f"call {i}: the frames above the interpreter differ")

    def assert_not_cut(self, arm):
        for i, (ips, first, _) in enumerate(self.frames(arm)):
            self.assertIsNotNone(first, f"call {i}: no interpreter frame: {ips}")
            self.assertGreater(len(ips) - first, 3, f"call {i}: {arm}: cut: {ips}")

    def test_no_python_stacks_means_no_cut(self):
        self.assert_not_cut("nopython")


if __name__ == "__main__":
    harness.main(child)
