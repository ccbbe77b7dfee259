"""2. No memguard collection while dynamo compiles on the thread (nor inside a torch.compile region).

Scenario A (dynamo compiles): a function with two graph breaks is compiled with a leaky backend, so
the compiles of the resume functions run while the mark of the first compile is pending (the
backend checks that memguard's profile function is installed on the thread at that moment, i.e. the
deferral is exercised, not vacuous).
Scenario B (a lazy backward compile, aot_autograd): its mark is set inside the compile context
of the backward compile, with no frame boundary, so the compile context is all that defers it.
Scenario C (a torch.compile region): f calls g, which has a graph break, so g runs as its own
compiled frame inside f's region; a second call changes a value only g's resume function guards on,
so only that resume function recompiles, with the compiling call (g) deep inside f's region: its
safe point must wait until f's region is left.

Every collection is recorded with its context by a gc.callbacks probe and matched to the report's Y
records. Checks: no memguard collection while a compile context is set, while convert_frame.py is
on the stack, while a backend runs, or while an eval-frame callback is set (inside a region); yet
every compile's garbage is collected by memguard, once the compiling call has returned.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def child(arm):
    import threading

    import torch
    from torch._dynamo.backends.common import aot_autograd

    import childlib

    childlib.no_automatic_full_collections()
    state = {"phase": "setup"}
    seen_in_backend = []

    def on_compile():
        seen_in_backend.append({"compile_id": str(torch._guards.CompileContext.current_compile_id()),
                                "profile": childlib.profile_owner(), "compiling": childlib.compiling()})

    dyn = childlib.LeakyBackend(1 << 16, on_compile=on_compile)
    fw = childlib.LeakyBackend(1 << 16, promote=True, boxed=True, on_compile=on_compile)
    # garbage from the end of the backward compile (see test_lazy_backward.py for the other kind)
    bw = childlib.LeakyBackend(1 << 16, promote=True, boxed=True, on_compile=on_compile, until_run=False)
    ends = childlib.EndCallbacks()

    from torch._C._dynamo.eval_frame import get_eval_frame_callback

    def ctx():
        return {"phase": state["phase"], "compiling": childlib.compiling(),
                "convert_frame": childlib.convert_frame_on_stack(),
                "in_region": get_eval_frame_callback() is not None,
                "in_backend": dyn.in_backend + fw.in_backend + bw.in_backend > 0,
                "alive": dyn.alive() + fw.alive() + bw.alive()}

    probe = childlib.GcProbe(ctx).start()

    def f(x):
        y = torch.sin(x) + 1
        torch._dynamo.graph_break()
        y = torch.cos(y) * 2
        torch._dynamo.graph_break()
        return torch.tanh(y) - 1

    cf = torch.compile(f, backend=dyn)
    state["phase"] = "A.call"
    out_a = cf(torch.randn(16))
    state["phase"] = "A.after"
    alive_a = dyn.alive()

    def g(x):
        return (torch.sin(x) * x).sum()

    cg = torch.compile(g, backend=aot_autograd(fw_compiler=fw, bw_compiler=bw))
    x = torch.randn(16, requires_grad=True)
    state["phase"] = "B.forward"
    loss = cg(x)
    state["phase"] = "B.backward"
    loss.backward()
    state["phase"] = "B.after"
    alive_b = fw.alive() + bw.alive()

    scale = [1.0]

    def inner(y):
        torch._dynamo.graph_break()
        return y * scale[0]  # read after the break: only the resume function guards on it

    def outer(x):
        return torch.cos(inner(torch.sin(x) + 1))

    co = torch.compile(outer, backend=dyn)
    state["phase"] = "C.call1"
    co(torch.randn(16))
    scale[0] = 2.0
    n = len(dyn.leaked)
    state["phase"] = "C.call2"
    co(torch.randn(16))
    state["phase"] = "C.after"
    c_recompiled = [cid for cid, _ in dyn.leaked[n:]]
    alive_c = dyn.alive()
    events = probe.stop()
    return {"tid": threading.get_native_id(), "probe": events, "ends": ends.events,
            "in_backend": seen_in_backend, "alive_a": alive_a, "alive_b": alive_b, "alive_c": alive_c,
            "c_recompiled": c_recompiled,
            "out_a": float(out_a.sum()).hex(),
            "leaked": [cid for b in (dyn, fw, bw) for cid, _ in b.leaked]}


class DeferWhileCompiling(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        cls.run_ = harness.run_child(__file__, {}, env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": None})

    def test_marks_pending_while_compiling(self):
        """The scenario exercises the deferral: a mark is pending during later compiles."""
        run = self.run_
        self.assertChildOk(run)
        r = run.result
        pending = [e for e in r["in_backend"] if e["profile"] == "memguard"]
        self.assertTrue(pending, f"no compile ran with a mark pending: {r['in_backend']}\n" + run.describe())
        lazy = [e for e in r["ends"] if e["trigger"] == "LAZY_BACKWARD"]
        self.assertEqual(len(lazy), 1, r["ends"])
        self.assertEqual(lazy[0]["profile"], "memguard", "the lazy backward compile marks its thread")

    def test_no_collection_while_compiling(self):
        run = self.run_
        self.assertChildOk(run)
        ys = run.align(run.result["probe"])
        mine = [(e, y) for e, y in zip(run.result["probe"], ys) if y["trigger"] == "memguard"]
        self.assertTrue(mine, "no memguard collection at all\n" + run.describe())
        for e, y in mine:
            c = e["ctx"]
            self.assertFalse(c["compiling"], f"memguard collected inside a compile context: {e} {y}")
            self.assertFalse(c["convert_frame"], f"memguard collected inside convert_frame: {e} {y}")
            self.assertFalse(c["in_backend"], f"memguard collected inside a backend: {e} {y}")
            self.assertFalse(c["in_region"], f"memguard collected inside a torch.compile region: {e} {y}")

    def test_every_compile_collected_after_it(self):
        run = self.run_
        self.assertChildOk(run)
        r = run.result
        self.assertEqual(r["alive_a"], 0, "scenario A's garbage collected after the call")
        self.assertEqual(r["alive_b"], 0, "scenario B's garbage collected by the end of backward")
        self.assertEqual(r["alive_c"], 0, "scenario C's garbage collected after the call")
        self.assertEqual(len(r["c_recompiled"]), 1, "the second call of C recompiles one resume function")
        ys = run.align(r["probe"])
        mine = [(e, y) for e, y in zip(r["probe"], ys) if y["trigger"] == "memguard"]
        phases = [e["ctx"]["phase"] for e, _ in mine]
        # A: one collection for the call and its resume functions' compiles; B: one after the forward
        # compile, one for the lazy backward compile; C: one per call.
        self.assertEqual(phases, ["A.call", "B.forward", "B.backward", "C.call1", "C.call2"], "\n" + run.describe())
        self.assertEqual(mine[-1][1]["compile_ids"], r["c_recompiled"])
        a_ids = sorted(mine[0][1]["compile_ids"])
        self.assertEqual(a_ids, sorted(e["compile_id"] for e in r["ends"][:3]))
        for e, y in mine:
            self.assertEqual(y["tid"], r["tid"])
            self.assertGreater(e["ctx"]["alive"], 0, "each memguard collection had garbage to free")


if __name__ == "__main__":
    harness.main(child)
