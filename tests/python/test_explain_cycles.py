"""21. What held it (issue 21, prototype): one collection's garbage explained without keeping it alive.

The child runs under LD_PRELOAD with real CPU torch; src/python/memguard_explain.py (not yet
embedded) is run in memguard's torch side's namespace, as the library will run it, and the torch
side's `device_of` seam tags host tensors as device 0. It plants three cycles that hold tensors:
  frame     a frame whose local holds a 4 MiB tensor and the frame itself
  closure   a function whose closure cell holds a 2 MiB tensor and the function
  context   an autograd.Function context that keeps its output (1 MiB) and saved its input (1 MiB)
plus an object with __del__ and a weakref callback in the frame's cycle.

Checks: the explanation names the frame (function and file:line), the closure's function, the
context's class, the four storages with their sizes, and a referrer chain from the frame, the
function and the context to the largest tensors; after the explained collection the program sees
what it sees after a plain one: the same objects alive (type counts of gc.get_objects()), the same
finalizer and weakref callback events, the planted tensors freed, gc.garbage empty, gc's debug flags
restored. A program that set DEBUG_SAVEALL itself keeps its gc.garbage and gets no explanation.
"""
import collections
import gc
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

MIB = 1 << 20
EXPLAIN_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "python",
                          "memguard_explain.py")


def child(arm):
    import weakref
    import torch
    import _memguard
    ns = _memguard._torch()
    assert ns is not None, "memguard's torch side is not installed"
    ns.device_of = lambda t: 0  # host tensors stand for CUDA ones
    with open(arm["explain_py"]) as f:
        exec(compile(f.read(), "<memguard>", "exec"), ns.__dict__)
    retrack = ns.ctypes_retrack()
    events = []

    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Finalized:
        def __del__(self):
            events.append("del")

    def frame_cycle():
        act = torch.zeros(4 * MIB // 4)
        fin = Finalized()
        me = sys._getframe()  # noqa: F841 (the frame holds itself)
        return [weakref.ref(act), weakref.ref(fin, lambda r: events.append("weakref"))]

    def closure_cycle():
        held = torch.zeros(2 * MIB // 4)

        def step():
            return held, step
        return [weakref.ref(held)]

    def context_cycle():
        x = torch.zeros(MIB // 4, requires_grad=True)
        y = F.apply(x)
        y.grad_fn.out = y
        return [weakref.ref(x), weakref.ref(y)]

    def plant():
        return frame_cycle() + closure_cycle() + context_cycle()

    def types_alive():
        # As a str (not a gc object), so one round's snapshot is not alive in the next one's.
        return json.dumps(collections.Counter(type(o).__qualname__ for o in gc.get_objects()))

    def round_(explain):
        events.clear()
        refs = plant()
        e = None
        if explain:
            _, e = ns.explained_collect(gc.collect, 2, retrack)
            e = json.dumps(e)  # the explanation is plain data; as a str it is no gc object
        else:
            gc.collect()
        seen = json.dumps({"events": list(events), "dead": [r() is None for r in refs],
                           "garbage": len(gc.garbage), "debug": gc.get_debug()})
        del refs
        return seen, types_alive(), e

    round_(True)  # warm-up: whatever the first use creates once (caches, interned names)
    round_(False)
    plain, plain_alive, _ = round_(False)
    explained, explained_alive, e = round_(True)
    plain, explained, e = json.loads(plain), json.loads(explained), json.loads(e)
    plain_alive, explained_alive = (collections.Counter(json.loads(a)) for a in (plain_alive, explained_alive))
    diff = {k: explained_alive[k] - plain_alive[k] for k in set(plain_alive) | set(explained_alive)
            if explained_alive[k] != plain_alive[k]}
    result = {"plain": plain, "explained": explained, "alive_diff": diff, "explanation": e,
              "text": ns.format_explanation(e), "file": __file__}
    gc.set_debug(gc.DEBUG_SAVEALL)  # the program saves garbage itself: left alone
    refs = plant()
    n0 = len(gc.garbage)
    _, e2 = ns.explained_collect(gc.collect, 2, retrack)
    result["user_saveall"] = {"explanation": e2, "kept": len(gc.garbage) - n0, "alive": [r() is not None for r in refs],
                              "debug": gc.get_debug()}
    gc.set_debug(0)
    del gc.garbage[:]
    return result


class ExplainCycles(harness.ChildTestCase):
    def test_explains_and_changes_nothing(self):
        run = harness.run_child(__file__, {"explain_py": os.path.abspath(EXPLAIN_PY)})
        self.assertChildOk(run)
        r = run.result
        print("\n".join(r["text"]))
        # Nothing the program sees changes.
        self.assertEqual(r["plain"]["dead"], [True] * 5)
        self.assertEqual(r["explained"], r["plain"])
        self.assertEqual(r["explained"]["events"], ["weakref", "del"])
        self.assertEqual(r["alive_diff"], {})
        # The explanation names the three holders and the four storages.
        e = r["explanation"]
        groups = {k: dict((name, n) for name, n in v) for k, v in e["groups"].items()}
        frames = [k for k in groups["frame"] if k.startswith("frame frame_cycle ")]
        self.assertEqual(len(frames), 1, groups["frame"])
        self.assertRegex(frames[0], r"test_explain_cycles\.py:\d+$")
        self.assertTrue(any(k.startswith("function child.<locals>.closure_cycle.<locals>.step ")
                            for k in groups["closure"]), groups["closure"])
        self.assertEqual(groups["autograd_function"], {"torch.autograd.function.FBackward": 1})
        sizes = sorted(t["bytes"] for t in e["tensors"])
        self.assertEqual(sizes, [MIB, MIB, 2 * MIB, 4 * MIB])
        self.assertEqual(e["cuda_bytes"], 8 * MIB)
        by_size = {}
        for t in e["tensors"]:
            by_size.setdefault(t["bytes"], []).append(t)
        four, two = by_size[4 * MIB][0], by_size[2 * MIB][0]
        self.assertTrue(four["chain"][0][0].startswith("frame frame_cycle "), four["chain"])
        self.assertEqual(four["chain"][0][1], "act")
        self.assertTrue(two["chain"][0][0].startswith("function child.<locals>.closure_cycle.<locals>.step "),
                        two["chain"])
        self.assertEqual(two["chain"][-2], ["builtins.cell", "cell_contents"])
        saved = [t for t in by_size[MIB] if t["how"] == "saved by FBackward"]
        self.assertEqual(len(saved), 1, by_size[MIB])
        kept = [t for t in by_size[MIB] if t["how"] == "tensor"][0]
        self.assertIn(["torch.autograd.function.FBackward", "__dict__"], kept["chain"])
        # A program's own DEBUG_SAVEALL: its garbage stays in gc.garbage, no explanation.
        u = r["user_saveall"]
        self.assertIsNone(u["explanation"])
        self.assertGreater(u["kept"], 0)
        self.assertEqual(u["debug"], gc.DEBUG_SAVEALL)


if __name__ == "__main__":
    harness.main(child)
