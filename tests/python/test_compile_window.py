"""11. The compile window: memguard freezes older objects while a compile's garbage waits.

Scenario A (no freeze by the program): compile and call; during the compile (inside the backend)
gc.get_freeze_count() is far above what it was (0, or on CPython 3.12 the interpreter's own few
hundred frozen tuples), after the call it is 0, the compile's garbage is freed, and an
object that became cyclic garbage before the compile (frozen meanwhile) is freed by the next
ordinary full collection. Scenario B (the program froze objects itself): memguard leaves the
program's freeze alone (the count is unchanged during and after) and still frees the garbage.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def child(arm):
    import gc
    import weakref

    import torch

    import childlib

    childlib.no_automatic_full_collections()
    if arm["user_freeze"]:
        gc.collect()
        gc.freeze()
    before = gc.get_freeze_count()

    class Node:
        pass

    old = Node()
    old.self = old  # a cycle made before the compile...
    old_ref = weakref.ref(old)

    seen = {}
    leaky = childlib.LeakyBackend(1 << 16)

    def backend(gm, example_inputs):
        seen["frozen_during_compile"] = gc.get_freeze_count()
        return leaky(gm, example_inputs)

    def f(x):
        return torch.cos(x) + 1

    cf = torch.compile(f, backend=backend)
    del old  # ...that becomes garbage while older objects may be frozen
    cf(torch.randn(8))
    after_call = gc.get_freeze_count()
    garbage_alive = sum(1 for _, r in leaky.leaked if r() is not None)
    old_alive_after_call = old_ref() is not None
    gc.collect()
    return {"before": before, "during": seen.get("frozen_during_compile"), "after_call": after_call,
            "garbage_alive": garbage_alive, "leaked": len(leaky.leaked),
            "old_alive_after_call": old_alive_after_call, "old_alive_after_full": old_ref() is not None}


class CompileWindow(harness.ChildTestCase):
    def test_window_opens_and_closes(self):
        run = harness.run_child(__file__, {"user_freeze": False}, env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": None})
        self.assertChildOk(run)
        r = run.result
        # 0, or on CPython 3.12 the few hundred tuples the interpreter freezes at start-up, which
        # memguard takes for no freeze of the program's.
        self.assertLess(r["before"], 1000)
        self.assertGreater(r["during"], r["before"] + 1000,
                           "older objects are frozen during the compile\n" + run.describe())
        self.assertEqual(r["after_call"], 0, "and unfrozen once the compile's garbage was collected")
        self.assertGreater(r["leaked"], 0)
        self.assertEqual(r["garbage_alive"], 0, "the compile's garbage is freed\n" + run.describe())
        self.assertFalse(r["old_alive_after_full"], "older garbage is freed by the next full collection")

    def test_program_freeze_is_left_alone(self):
        run = harness.run_child(__file__, {"user_freeze": True}, env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": None})
        self.assertChildOk(run)
        r = run.result
        self.assertGreater(r["before"], 0)
        # Frozen objects can still die by reference count, so the count may only shrink a little.
        self.assertLessEqual(r["during"], r["before"], "memguard does not freeze on top of the program's freeze")
        self.assertGreater(r["during"], r["before"] * 0.9, "nor unfreeze the program's objects")
        self.assertLessEqual(r["after_call"], r["before"])
        self.assertGreater(r["after_call"], r["before"] * 0.9, "the program's objects stay frozen after the call")
        self.assertEqual(r["garbage_alive"], 0, "the compile's garbage is still freed\n" + run.describe())

    def test_toggle_off_freezes_nothing(self):
        run = harness.run_child(__file__, {"user_freeze": False}, env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": "0"})
        self.assertChildOk(run)
        r = run.result
        self.assertEqual(r["during"], r["before"])  # (0, or CPython 3.12's own frozen tuples)
        self.assertEqual(r["after_call"], r["before"])


if __name__ == "__main__":
    harness.main(child)
