"""12. Compile garbage whose reference cycle passes through an object older than the compile.

The backend makes two cycles that each hold a real tensor and become garbage when the compiled code
first runs: one made only of objects created during the compile (as in the other tests), and one
through an object that existed before the compile started (an object of the program's, to which
the compile attached state that points back at it; the program drops its last outside reference
when the compiled code first runs). Both are cyclic garbage after the call: with
MEMGUARD_COLLECT_COMPILE_GARBAGE=0 both tensors are alive after the call and a full gc.collect()
frees both. Checks: with the hook, memguard's collection frees both by the time the call returned.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def child(arm):
    import gc
    import weakref

    import torch

    import childlib

    childlib.no_automatic_full_collections()

    class Holder:
        pass

    registry = [Holder()]  # the program's object, created before any compile
    refs = {}
    new_cycle = childlib.LeakyBackend(1 << 16)

    def backend(gm, example_inputs):
        old = registry[0]
        t = torch.ones(1 << 16)
        refs["through_old"] = weakref.ref(t)
        state = {"tensor": t, "owner": old}
        old.compile_state = state  # old -> state -> old: a cycle through an older object
        runner = new_cycle(gm, example_inputs)  # a cycle of objects made during the compile

        def run(*args):
            registry.clear()  # the program drops the older object: the cycle is garbage now
            return runner(*args)
        return run

    def f(x):
        return torch.sin(x) * 2

    cf = torch.compile(f, backend=backend)
    cf(torch.randn(8))
    out = {"new_alive_after_call": new_cycle.alive(), "old_alive_after_call": refs["through_old"]() is not None,
           "new_compiled": new_cycle.compiles}
    gc.collect()
    out["new_alive_after_full"] = new_cycle.alive()
    out["old_alive_after_full"] = refs["through_old"]() is not None
    return out


class CompileGarbageThroughOlderObjects(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        cls.on = harness.run_child(__file__, {}, env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": None})
        cls.off = harness.run_child(__file__, {}, env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": "0"})
        cls.full = harness.run_child(__file__, {}, env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": None,
                                                         "MEMGUARD_COMPILE_WINDOW": "0"})

    def test_both_are_garbage_without_the_hook(self):
        r = self.off.result
        self.assertChildOk(self.off)
        self.assertEqual(r["new_compiled"], 1)
        self.assertEqual(r["new_alive_after_call"], 1, "the new cycle outlives the call without the hook")
        self.assertTrue(r["old_alive_after_call"], "the cycle through the older object too")
        self.assertEqual(r["new_alive_after_full"], 0, "a full collection frees it: garbage")
        self.assertFalse(r["old_alive_after_full"], "a full collection frees it: garbage")

    def test_hook_frees_the_new_cycle(self):
        self.assertChildOk(self.on)
        self.assertEqual(self.on.result["new_alive_after_call"], 0, self.on.describe())

    def test_without_the_window_the_collection_frees_both(self):
        self.assertChildOk(self.full)
        self.assertEqual(self.full.result["new_alive_after_call"], 0, self.full.describe())
        self.assertFalse(self.full.result["old_alive_after_call"], self.full.describe())

    @unittest.expectedFailure
    def test_hook_frees_the_cycle_through_an_older_object(self):
        """KNOWN LIMIT (expected failure; since the compile window, fc6abe2; MEMGUARD_COMPILE_WINDOW=0
        lifts it at the cost of a whole-heap collection): the compile window
        freezes every object that exists when the compile starts, so memguard's collection at the
        safe point does not look at them; a garbage cycle that passes through one of them is seen
        as referenced from outside and survives. After the window closes it sits in the oldest
        generation until some later full collection, as without the hook. Expected: the tensor
        freed when the call returned (as before the window); observed: alive."""
        self.assertChildOk(self.on)
        self.assertFalse(self.on.result["old_alive_after_call"], self.on.describe())


if __name__ == "__main__":
    harness.main(child)
