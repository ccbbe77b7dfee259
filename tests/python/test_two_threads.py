"""6. Two threads compiling at once each collect their own marks, on their own threads.

Scenario: threads A and B, each with its own function (so its own compile ids) compiled with its
own leaky backend. A's function has a graph break; in the eager part between its two graphs A
waits until B is compiling, so B's compile runs while A's mark is pending (and A's resume function
compiles after B's compile, from inside A's compiling call). Each calls its function twice.
Checks: every compile's X record is on the thread that compiled it; the timeline really overlaps
(A's first compile, then B's compile, then A's collection); each thread's compile ids are named by
memguard Y records on that thread only (no mark moves to the other thread, none is lost, one
collection per compiling call); each thread's garbage is freed by the time its call returned.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def child(arm):
    import threading
    import time

    import torch

    import childlib

    childlib.no_automatic_full_collections()
    ends = childlib.EndCallbacks()
    a_in_call = threading.Event()    # A is inside its compiling call, its mark pending
    b_compiling = threading.Event()  # B's backend runs
    out = {}

    @torch._dynamo.disable
    def rendezvous():
        a_in_call.set()
        if not b_compiling.wait(60):
            raise RuntimeError("B never compiled")

    def f0(x):
        y = torch.sin(x) + 1
        rendezvous()
        return y * 3

    def f1(x):
        return torch.cos(x) - 1

    def on_compile_b():
        b_compiling.set()
        time.sleep(0.2)  # A resumes while B still compiles

    def worker(name, fn, on_compile, wait_for):
        backend = childlib.LeakyBackend(1 << 16, on_compile=on_compile)
        cf = torch.compile(fn, backend=backend)
        x = torch.randn(16)
        if wait_for is not None and not wait_for.wait(60):
            raise RuntimeError("A never called")
        cf(x)
        alive_after_first = backend.alive()
        cf(x)
        out[name] = {"tid": threading.get_native_id(), "compiled": [cid for cid, _ in backend.leaked],
                     "alive_after_first": alive_after_first, "alive_after": backend.alive(),
                     "profile_after": childlib.profile_owner()}

    threads = [threading.Thread(target=worker, args=("a", f0, None, None)),
               threading.Thread(target=worker, args=("b", f1, on_compile_b, a_in_call))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out["ends"] = ends.events
    return out


class TwoThreads(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        cls.run_ = harness.run_child(__file__, {}, env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": None})

    def test_each_thread_collects_its_own_marks(self):
        run = self.run_
        self.assertChildOk(run)
        r = run.result
        rep = run.need_report()
        self.assertNotEqual(r["a"]["tid"], r["b"]["tid"])
        for name in ("a", "b"):
            me = r[name]
            self.assertTrue(me["compiled"], name)
            x_ids = sorted(cid for _, tid, cid in rep.X if tid == me["tid"])
            self.assertEqual(x_ids, sorted(me["compiled"]), f"thread {name}: X records on its own thread")
            mine = [y for y in rep.memguard_Y() if y["tid"] == me["tid"]]
            named = sorted(cid for y in mine for cid in y["compile_ids"])
            self.assertEqual(named, sorted(me["compiled"]),
                             f"thread {name}: its compiles are collected on it, each once\n" + run.describe())
            self.assertEqual(len(mine), 1, f"thread {name}: one collection for one compiling call")
            self.assertEqual(me["alive_after_first"], 0, f"thread {name}: garbage freed after its call")
            self.assertEqual(me["alive_after"], 0)
            self.assertEqual(me["profile_after"], "none")
        all_named = [cid for y in rep.memguard_Y() for cid in y["compile_ids"]]
        self.assertEqual(sorted(all_named), sorted(r["a"]["compiled"] + r["b"]["compiled"]))

    def test_compiles_overlapped(self):
        """B compiled while A's mark was pending: X(A) < X(B) < Y(A); and A's resume function
        compiled after B's compile, inside A's compiling call."""
        run = self.run_
        self.assertChildOk(run)
        rep = run.need_report()
        a, b = run.result["a"], run.result["b"]
        xa = sorted(t for t, tid, _ in rep.X if tid == a["tid"])
        xb = sorted(t for t, tid, _ in rep.X if tid == b["tid"])
        ya = [y["t"] for y in rep.memguard_Y() if y["tid"] == a["tid"]]
        self.assertEqual(len(xa), 2)
        self.assertTrue(xa[0] < xb[0] < xa[1] < ya[0], f"X(A)={xa} X(B)={xb} Y(A)={ya}")


if __name__ == "__main__":
    harness.main(child)
