"""10. Python allocation sites: an A record's python_stack_id resolves, through the P and p records,
to the Python function and line that called cudaMalloc.

The fake CUDA runtime is loaded with ctypes and cudaMalloc is called through the global scope,
where the preloaded libmemguard.so's definition comes first:
  with_gil     ctypes.PyDLL(None): the GIL is held during the call;
  without_gil  ctypes.CDLL(None): ctypes releases the GIL around the call;
  thread       ctypes.CDLL(None) from a second Python thread.
Each call has its own size, to find its A record. Expected stacks: innermost frame the calling
function at the calling line (recorded by the child itself), then its callers.

Without the GIL memguard reads the thread's frames directly with its calibrated frame walker,
which exists for CPython 3.11 to 3.13 (the debug log says "Python stacks on allocations: from
every thread with Python frames"; docs/architecture.md): there the GIL-released calls must get
their stacks too. On other versions only a thread holding the GIL gets a stack, and the
GIL-released calls must have python_stack_id 0. With MEMGUARD_PYTHON_STACKS=0 no call gets one.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SIZES = {"with_gil": (1 << 20) + 256, "without_gil": (1 << 20) + 512, "thread": (1 << 20) + 768}
GIL_FREE_LINE = "Python stacks on allocations: from every thread with Python frames"


def child(arm):
    import ctypes
    import threading

    ctypes.CDLL(arm["fake_cudart"])  # RTLD_LOCAL, as PyTorch loads the real runtime
    held, released = ctypes.PyDLL(None), ctypes.CDLL(None)
    for lib in (held, released):
        lib.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        lib.cudaFree.argtypes = [ctypes.c_void_p]
    out = {"sites": {}}

    def allocate_with_gil(size):
        p = ctypes.c_void_p()
        rc = held.cudaMalloc(ctypes.byref(p), size); line = sys._getframe().f_lineno  # noqa: E702
        return p, rc, line

    def allocate_without_gil(size):
        p = ctypes.c_void_p()
        rc = released.cudaMalloc(ctypes.byref(p), size); line = sys._getframe().f_lineno  # noqa: E702
        return p, rc, line

    def site(name, fn, size):
        caller_line = sys._getframe(1).f_lineno
        p, rc, line = fn(size)
        out["sites"][name] = {"rc": rc, "function": fn.__name__, "line": line, "caller": "site",
                              "caller_line": sys._getframe().f_lineno - 2, "outer_line": caller_line,
                              "tid": threading.get_native_id()}
        released.cudaFree(p)

    site("with_gil", allocate_with_gil, SIZES["with_gil"])
    site("without_gil", allocate_without_gil, SIZES["without_gil"])

    def in_thread():
        site("thread", allocate_without_gil, SIZES["thread"])

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    out["file"] = os.path.abspath(__file__)
    out["python"] = list(sys.version_info[:2])
    return out


class AllocationSites(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        arm = {"fake_cudart": harness.fake_cudart_path()}
        cls.run_ = harness.run_child(__file__, arm)
        cls.nostacks = harness.run_child(__file__, arm, env={"MEMGUARD_PYTHON_STACKS": "0"})

    def record(self, run, name):
        rep = run.need_report()
        a = [a for a in rep.A if a["size"] == SIZES[name]]
        self.assertEqual(len(a), 1, f"{name}: one A record of size {SIZES[name]}\n" + run.describe())
        self.assertEqual(a[0]["api"], "cudaMalloc")
        self.assertEqual(a[0]["tid"], run.result["sites"][name]["tid"])
        return rep, a[0]

    def check_stack(self, run, name):
        rep, a = self.record(run, name)
        site = run.result["sites"][name]
        self.assertEqual(site["rc"], 0)
        self.assertNotEqual(a["python_stack_id"], 0, f"{name}: a Python stack expected\n" + run.describe())
        stack = rep.python_stack(a["python_stack_id"])
        here = run.result["file"]
        self.assertEqual(stack[0], (site["function"], here, site["line"]), f"{name}: innermost frame {stack}")
        self.assertEqual(stack[1], ("site", here, site["caller_line"]), f"{name}: its caller {stack}")
        if name == "thread":
            self.assertEqual(stack[2][0], "in_thread")
            self.assertEqual(stack[-1][0], "_bootstrap", f"the thread's outermost frame: {stack}")
        else:
            self.assertEqual(stack[2], ("child", here, site["outer_line"]))
            self.assertEqual(stack[-1][0], "<module>", f"the main thread's outermost frame: {stack}")

    def test_with_gil(self):
        self.assertChildOk(self.run_)
        self.check_stack(self.run_, "with_gil")

    def test_without_gil(self):
        run = self.run_
        self.assertChildOk(run)
        walker = tuple(run.result["python"]) in ((3, 11), (3, 12), (3, 13))
        self.assertEqual(GIL_FREE_LINE in run.stderr, walker,
                         "the GIL-free frame walker is used exactly on CPython 3.11 to 3.13\n" + run.describe())
        for name in ("without_gil", "thread"):
            if walker:
                self.check_stack(run, name)
            else:
                _, a = self.record(run, name)
                self.assertEqual(a["python_stack_id"], 0, f"{name}: GIL released and no frame walker")

    def test_stacks_off(self):
        run = self.nostacks
        self.assertChildOk(run)
        rep = run.need_report()
        for name in SIZES:
            _, a = self.record(run, name)
            self.assertEqual(a["python_stack_id"], 0, name)
        self.assertEqual(rep.pstacks, {})


if __name__ == "__main__":
    harness.main(child)
