"""5. A compiled call that raises keeps its mark until the next normal safe point.

Scenario: a function with a graph break is compiled (two compiles: the function and its resume
function); the second compiled graph raises RuntimeError when it runs (an error inside the compiled
region, after compiling). The exception propagates through the compiling call's frame and two more
frames of the test to a handler. Checks: no memguard collection happens before the handler runs
(the returns on the way are exceptional); the mark is still pending in the handler (memguard's
profile function installed); the collection happens at the handler's first normal return, names
both compiles and frees their garbage. A second, normal call compiles nothing and collects nothing.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def child(arm):
    import threading

    import torch

    import childlib

    childlib.no_automatic_full_collections()
    state = {"phase": "setup", "raise": True}
    backend = childlib.LeakyBackend(1 << 16, raise_on_run=lambda: state["raise"] and backend.compiles == 2)

    def f(x):
        y = torch.sin(x) + 1
        torch._dynamo.graph_break()
        return torch.cos(y) * 2

    cf = torch.compile(f, backend=backend)
    probe = childlib.GcProbe(lambda: {"phase": state["phase"], "alive": backend.alive()}).start()
    result = {"tid": threading.get_native_id()}

    def inner(x):
        return cf(x) + 1

    def outer(x):
        return inner(x) * 2

    x = torch.randn(16)
    state["phase"] = "call"
    try:
        outer(x)
        result["raised"] = False
    except RuntimeError:
        state["phase"] = "handler"  # first statement: no normal return since the raise
        result["raised"] = True
        result["profile_in_handler"] = childlib.profile_owner()  # its return is a safe point
        result["alive_in_handler_after_first_return"] = backend.alive()
    state["phase"] = "after"
    result["compiled"] = [cid for cid, _ in backend.leaked]
    result["alive_after"] = backend.alive()
    state["raise"] = False
    state["phase"] = "second call"
    outer(x)
    state["phase"] = "end"
    result["compiled_total"] = len(backend.leaked)
    result["probe"] = probe.stop()
    return result


class ExceptionKeepsMark(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        cls.run_ = harness.run_child(__file__, {}, env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": None})

    def test_mark_survives_the_exceptional_return(self):
        run = self.run_
        self.assertChildOk(run)
        r = run.result
        self.assertTrue(r["raised"])
        self.assertEqual(len(r["compiled"]), 2, "the function and its resume function compiled")
        self.assertEqual(r["profile_in_handler"], "memguard", "the mark is still pending in the handler")
        ys = run.align(r["probe"])
        mine = [(e, y) for e, y in zip(r["probe"], ys) if y["trigger"] == "memguard"]
        self.assertEqual(len(mine), 1, f"exactly one memguard collection: {mine}\n" + run.describe())
        e, y = mine[0]
        self.assertEqual(e["ctx"]["phase"], "handler",
                         "collected at the handler's first normal return, not on the exceptional path")
        self.assertEqual(e["ctx"]["alive"], 2, "the garbage was still there when the collection began")
        self.assertEqual(sorted(y["compile_ids"]), sorted(r["compiled"]))
        self.assertEqual(y["tid"], r["tid"])

    def test_garbage_freed_then(self):
        run = self.run_
        self.assertChildOk(run)
        r = run.result
        self.assertEqual(r["alive_in_handler_after_first_return"], 0)
        self.assertEqual(r["alive_after"], 0)
        self.assertEqual(r["compiled_total"], 2, "the second call compiles nothing")


if __name__ == "__main__":
    harness.main(child)
