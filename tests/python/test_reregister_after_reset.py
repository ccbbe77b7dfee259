"""4. memguard's end-of-compile callback survives torch._dynamo.reset().

reset() clears dynamo's callback lists (callback_handler.clear); memguard wraps clear to register
again. Scenario: compile and call, reset, compile and call again, reset, compile a third time.
Checks: after each reset memguard's callback is registered exactly once; every compile has exactly
one X record (no duplicate registration) and is named by a memguard Y record on the thread; each
compile's garbage is freed after its call.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def child(arm):
    import threading

    import torch
    import torch._dynamo.callback as cb

    import childlib

    childlib.no_automatic_full_collections()
    def memguard_callbacks():
        return sum(1 for c in cb.callback_handler.end_callbacks
                   if getattr(c, "__name__", "") == "memguard_compile_end")

    backend = childlib.LeakyBackend(1 << 16)

    def f(x):
        return torch.sin(x) * 2 + 1

    rounds = []
    x = torch.randn(16)
    for i in range(3):
        if i > 0:
            torch._dynamo.reset()
        n = len(backend.leaked)
        registered = memguard_callbacks()
        cf = torch.compile(f, backend=backend)
        cf(x)
        cf(x)
        new = backend.leaked[n:]
        rounds.append({"registered_before_compile": registered, "compiled": [cid for cid, _ in new],
                       "alive_after": sum(1 for _, r in new if r() is not None),
                       "clear_is_wrapped": "memguard" in (cb.callback_handler.clear.__doc__ or "")})
    return {"tid": threading.get_native_id(), "rounds": rounds}


class ReregisterAfterReset(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        cls.run_ = harness.run_child(__file__, {}, env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": None})

    def test_registered_once_after_each_reset(self):
        run = self.run_
        self.assertChildOk(run)
        for i, r in enumerate(run.result["rounds"]):
            self.assertEqual(r["registered_before_compile"], 1, f"round {i}: memguard callbacks registered")
            self.assertTrue(r["clear_is_wrapped"], f"round {i}: callback_handler.clear is memguard's wrapper")

    def test_compiles_after_reset_are_collected(self):
        run = self.run_
        self.assertChildOk(run)
        rep = run.need_report()
        tid = run.result["tid"]
        rounds = run.result["rounds"]
        for i, r in enumerate(rounds):
            self.assertEqual(len(r["compiled"]), 1, f"round {i} compiles once")
            self.assertEqual(r["alive_after"], 0, f"round {i}: garbage freed after the call\n" + run.describe())
        x_ids = [cid for _, t, cid in rep.X if t == tid]
        self.assertEqual(len(x_ids), len(rounds), f"one X record per compile: {x_ids}")
        mg = [y for y in rep.memguard_Y() if y["tid"] == tid]
        self.assertEqual(len(mg), len(rounds), f"one memguard collection per round: {mg}\n" + run.describe())
        for r, y in zip(rounds, mg):
            self.assertEqual(y["compile_ids"], r["compiled"])


if __name__ == "__main__":
    harness.main(child)
