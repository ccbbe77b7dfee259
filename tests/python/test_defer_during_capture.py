"""3. No memguard collection while a stream capture is in progress anywhere in the process.

The fake CUDA runtime is loaded with ctypes (RTLD_LOCAL, as PyTorch loads the real one); the
capture calls are made through the process's global scope (ctypes.CDLL(None)), where the preloaded
libmemguard.so's cudaStreamBeginCapture / cudaStreamEndCapture come first; memguard feeds its
capture view and forwards to the fake, which it finds among the loaded objects. The report's C and
c records show that the calls went through memguard.

  same thread   begin a capture, call a compiling function (its mark is set), do several normal
                returns: no collection; end the capture: one collection, at the next normal return.
  other thread  a helper thread begins a capture on its own stream; the main thread compiles and
                returns normally several times: no collection; the helper ends its capture: one
                collection on the main thread.
Every collection is matched to the report (gc probe) and checked against the capture phases; the
compile garbage is alive while the capture runs and freed right after it ends.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

MODE_GLOBAL = 0
MODE_RELAXED = 2


def child(arm):
    import ctypes
    import threading

    import torch

    import childlib

    childlib.no_automatic_full_collections()
    fake = ctypes.CDLL(arm["fake_cudart"])  # RTLD_LOCAL: not in the global scope
    glob = ctypes.CDLL(None)                # the global scope: libmemguard.so's symbols first
    begin, end = glob.cudaStreamBeginCapture, glob.cudaStreamEndCapture
    begin.argtypes = [ctypes.c_void_p, ctypes.c_int]
    end.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    state = {"phase": "setup"}
    backend = childlib.LeakyBackend(1 << 16)
    probe = childlib.GcProbe(lambda: {"phase": state["phase"], "alive": backend.alive()}).start()
    out = {"tid": threading.get_native_id(),
           "begin_is_memguards": ctypes.cast(begin, ctypes.c_void_p).value
           != ctypes.cast(fake.cudaStreamBeginCapture, ctypes.c_void_p).value}

    def new_stream():
        s = ctypes.c_void_p()
        rc = fake.cudaStreamCreate(ctypes.byref(s))
        if rc != 0:
            raise RuntimeError(f"cudaStreamCreate: {rc}")
        return s

    def nothing():
        return None

    def f(x):
        return torch.sin(x) * 2 + 1

    def g(x):
        return torch.cos(x) * 3 - 1

    cf, cg = torch.compile(f, backend=backend), torch.compile(g, backend=backend)
    x = torch.randn(16)

    # same thread
    stream = new_stream()
    graph = ctypes.c_void_p()
    state["phase"] = "A.capturing"
    out["A_begin"] = begin(stream, MODE_GLOBAL)
    cf(x)
    for _ in range(5):
        nothing()
    out["A_alive_in_capture"] = backend.alive()
    out["A_profile_in_capture"] = childlib.profile_owner()
    state["phase"] = "A.ended"
    out["A_end"] = end(stream, ctypes.byref(graph))
    nothing()  # the first normal return after the capture ended
    out["A_alive_after"] = backend.alive()

    # another thread's capture
    began, may_end, ended = threading.Event(), threading.Event(), threading.Event()

    def helper():
        s, gr = new_stream(), ctypes.c_void_p()
        out["B_begin"] = begin(s, MODE_RELAXED)
        out["B_tid"] = threading.get_native_id()
        began.set()
        may_end.wait(60)
        state["phase"] = "B.ended"
        out["B_end"] = end(s, ctypes.byref(gr))
        ended.set()

    t = threading.Thread(target=helper)
    t.start()
    began.wait(60)
    state["phase"] = "B.capturing"
    n = len(backend.leaked)
    cg(x)
    for _ in range(5):
        nothing()
    out["B_alive_in_capture"] = backend.alive()
    out["B_profile_in_capture"] = childlib.profile_owner()
    may_end.set()
    ended.wait(60)
    nothing()
    out["B_alive_after"] = backend.alive()
    t.join()
    out["A_compiled"] = [cid for cid, _ in backend.leaked[:n]]
    out["B_compiled"] = [cid for cid, _ in backend.leaked[n:]]
    out["probe"] = probe.stop()
    return out


class DeferDuringCapture(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        cls.run_ = harness.run_child(__file__, {"fake_cudart": harness.fake_cudart_path()},
                                     env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": None})

    def test_calls_went_through_memguard(self):
        run = self.run_
        self.assertChildOk(run)
        r = run.result
        self.assertTrue(r["begin_is_memguards"], "CDLL(None) resolved memguard's cudaStreamBeginCapture")
        for k in ("A_begin", "A_end", "B_begin", "B_end"):
            self.assertEqual(r[k], 0, f"{k} failed\n" + run.describe())
        rep = run.need_report()
        self.assertEqual(len(rep.C), 2, "two capture begins recorded by memguard")
        self.assertEqual(len(rep.c), 2, "two capture ends recorded by memguard")
        self.assertEqual([c["error"] for c in rep.c], [0, 0])

    def test_deferred_while_capturing(self):
        run = self.run_
        self.assertChildOk(run)
        r = run.result
        for s in ("A", "B"):
            self.assertTrue(r[f"{s}_compiled"], s)
            self.assertEqual(r[f"{s}_alive_in_capture"], len(r[f"{s}_compiled"]),
                             f"{s}: garbage kept while capturing\n" + run.describe())
            self.assertEqual(r[f"{s}_profile_in_capture"], "memguard", f"{s}: the mark still pending")
            self.assertEqual(r[f"{s}_alive_after"], 0, f"{s}: garbage freed once the capture ended")

    def test_one_collection_after_each_capture(self):
        run = self.run_
        self.assertChildOk(run)
        r = run.result
        ys = run.align(r["probe"])
        mine = [(e, y) for e, y in zip(r["probe"], ys) if y["trigger"] == "memguard"]
        self.assertEqual([e["ctx"]["phase"] for e, _ in mine], ["A.ended", "B.ended"],
                         "one collection after each capture ended, none during\n" + run.describe())
        self.assertEqual(mine[0][1]["compile_ids"], r["A_compiled"])
        self.assertEqual(mine[1][1]["compile_ids"], r["B_compiled"])
        for e, y in mine:
            self.assertEqual(y["tid"], r["tid"])
            self.assertGreater(e["ctx"]["alive"], 0)
        rep = run.need_report()
        (ca, cb), (ea, eb) = rep.C, rep.c
        self.assertEqual(cb["tid"], r["B_tid"])
        xs = {cid: t for t, _, cid in rep.X}
        self.assertTrue(ca["t"] < xs[r["A_compiled"][0]] < ea["t"] < mine[0][1]["t"])
        self.assertTrue(cb["t"] < xs[r["B_compiled"][0]] < eb["t"] < mine[1][1]["t"])


if __name__ == "__main__":
    harness.main(child)
