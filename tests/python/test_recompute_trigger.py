"""21. Collections after a recomputed backward and every N steps (issue 21, prototype), real CPU torch.

Children (under LD_PRELOAD, automatic collection off so that only memguard's collections free):
  recompute  three layers checkpointed by torch.utils.checkpoint (use_reentrant=True) and three by a
             Megatron-style CheckpointFunction defined after torch loaded; each layer's recompute
             plants a cycle holding its recomputed activation. With the trigger on, each cycle is
             freed before the next layer's backward recomputes; with MEMGUARD_COLLECT_RECOMPUTE_GARBAGE=0
             none is freed during the backward.
  steps      MEMGUARD_GC_EVERY_STEPS=2: a cycle planted at each memguard.step() is freed at steps
             2 and 4, not at 1 and 3.
"""
import os
import sys
import weakref

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


class Node:
    pass


def child(arm):
    import gc
    import torch
    import torch.utils.checkpoint as cp
    gc.disable()
    events = []
    if arm["kind"] == "steps":
        import memguard
        for i in range(1, 5):
            n = Node()
            n.self = n
            weakref.finalize(n, events.append, f"freed {i}")
            del n
            memguard.step()
            events.append(f"step {i}")
        return {"events": events}

    class CheckpointFunction(torch.autograd.Function):  # Megatron-LM's shape
        @staticmethod
        def forward(ctx, run_function, *args):
            ctx.run_function = run_function
            ctx.save_for_backward(*args)
            with torch.no_grad():
                return run_function(*args)

        @staticmethod
        def backward(ctx, *grads):
            inputs = [x.detach().requires_grad_(True) for x in ctx.saved_tensors]
            with torch.enable_grad():
                out = ctx.run_function(*inputs)
            torch.autograd.backward(out, grads)
            return (None,) + tuple(x.grad for x in inputs)

    def layer(tag):
        w = torch.randn(32, 32, requires_grad=True)

        def f(x):
            y = torch.tanh(x @ w)
            if torch.is_grad_enabled():  # the recompute: a cycle holds the recomputed activation
                n = Node()
                n.self, n.t = n, y
                weakref.finalize(y, events.append, f"freed {tag}")
                events.append(f"recompute {tag}")
            return y
        return f

    h = torch.randn(4, 32, requires_grad=True)
    for i in range(3):
        h = cp.checkpoint(layer(f"t{i}"), h, use_reentrant=True)
    for i in range(3):
        h = CheckpointFunction.apply(layer(f"m{i}"), h)
    h.sum().backward()
    events.append("backward done")
    return {"events": events}


class Test(harness.ChildTestCase):
    def run_kind(self, kind, env=None):
        run = harness.run_child(__file__, {"kind": kind}, env=env or {})
        self.assertChildOk(run)
        return run.result["events"]

    def test_recompute_frees_before_the_next_backward(self):
        ev = self.run_kind("recompute")
        order = ["m2", "m1", "m0", "t2", "t1", "t0"]
        expected = []
        for tag in order:
            expected += [f"recompute {tag}", f"freed {tag}"]
        self.assertEqual(ev, expected + ["backward done"])

    def test_recompute_trigger_off(self):
        ev = self.run_kind("recompute", env={"MEMGUARD_COLLECT_RECOMPUTE_GARBAGE": "0"})
        done = ev.index("backward done")
        self.assertFalse([e for e in ev[:done] if e.startswith("freed")], ev)

    def test_every_two_steps(self):
        ev = self.run_kind("steps", env={"MEMGUARD_GC_EVERY_STEPS": "2"})
        # One collection's finalizers run in no set order: compare the frees between step marks as sets.
        groups, cur = [], set()
        for e in ev:
            if e.startswith("step"):
                groups += [cur, e]
                cur = set()
            else:
                cur.add(e)
        self.assertEqual(groups, [set(), "step 1", {"freed 1", "freed 2"}, "step 2", set(), "step 3",
                                  {"freed 3", "freed 4"}, "step 4"])


if __name__ == "__main__":
    harness.main(child)
