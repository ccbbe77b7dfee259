"""21. What held it: one of memguard's collections explained without keeping anything alive.

The child runs under LD_PRELOAD with real CPU torch and the fake CUDA runtime (one cudaMalloc, so
that CUDA counts as in use and memguard explains its collections); the torch side's `device_of` seam
tags host tensors as device 0. It plants three cycles that hold tensors:
  frame     a frame whose local holds a 4 MiB tensor and the frame itself
  closure   a function whose closure cell holds a 2 MiB tensor and the function
  context   an autograd.Function context that keeps its output (1 MiB) and saved its input (1 MiB)
plus an object with __del__ and a weakref callback in the frame's cycle. memguard's step-trigger
collection (MEMGUARD_GC_EVERY_STEPS=1, asked for through the native _collect) explains them.

Checks: the report's j/u/y/r records name the frame (function and file:line), the closure's
function, the context's class, the four storages with their sizes, and a referrer chain from the
frame (through the local's name), the function and the context to the largest tensors, and the Y of
the collection names the explanation; after the explained collection the program sees what it sees
after a plain one: the same objects alive (type counts of gc.get_objects()), the same finalizer and
weakref callback events, the planted tensors freed, gc.garbage empty, gc's debug flags restored. A
program that set DEBUG_SAVEALL itself keeps its gc.garbage and gets no explanation. With
MEMGUARD_EXPLAIN_CYCLES=all the program's own gc.collect() is explained too.
"""
import collections
import gc
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

MIB = 1 << 20


def child(arm):
    import ctypes
    import weakref
    import torch
    import _memguard
    ns = _memguard._torch()
    assert ns is not None, "memguard's torch side is not installed"
    ns.device_of = lambda t: 0  # host tensors stand for CUDA ones
    ctypes.CDLL(arm["fake_cudart"])
    glob = ctypes.CDLL(None)
    glob.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    keep = ctypes.c_void_p()
    assert glob.cudaMalloc(ctypes.byref(keep), 1 << 20) == 0  # CUDA in use
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
        if explain == "memguard":
            assert ns._collect("step", 2) == 0
        else:
            gc.collect()  # explicit: explained only with MEMGUARD_EXPLAIN_CYCLES=all
        seen = json.dumps({"events": list(events), "dead": [r() is None for r in refs],
                           "garbage": len(gc.garbage), "debug": gc.get_debug()})
        del refs
        return seen, types_alive()

    if arm.get("all"):
        refs = plant()
        n = gc.collect()
        return {"n": n, "dead": [r() is None for r in refs]}
    round_("memguard")  # warm-up: whatever the first use creates once (caches, interned names)
    round_("plain")
    plain, plain_alive = round_("plain")
    explained, explained_alive = round_("memguard")
    plain, explained = json.loads(plain), json.loads(explained)
    plain_alive, explained_alive = (collections.Counter(json.loads(a)) for a in (plain_alive, explained_alive))
    diff = {k: explained_alive[k] - plain_alive[k] for k in set(plain_alive) | set(explained_alive)
            if explained_alive[k] != plain_alive[k]}
    result = {"plain": plain, "explained": explained, "alive_diff": diff}
    gc.set_debug(gc.DEBUG_SAVEALL)  # the program saves garbage itself: left alone
    refs = plant()
    n0 = len(gc.garbage)
    assert ns._collect("step", 2) == 0
    result["user_saveall"] = {"kept": len(gc.garbage) - n0, "alive": [r() is not None for r in refs],
                              "debug": gc.get_debug()}
    gc.set_debug(0)
    del gc.garbage[:]
    return result


ENV = {"MEMGUARD_GC_EVERY_STEPS": "1", "MEMGUARD_GC_BUDGET": "1", "MEMGUARD_EXPLAIN_MIN_BYTES": "0"}


def explanations(rep):
    """{explain id: {"j": ..., "u": [...], "y": [...], "r": {addr: [(object, edge)]}, "Y": the Y or None}}"""
    out = {j["explain"]: {"j": j, "u": [], "y": [], "r": {}, "Y": None} for j in rep.j}
    for u in rep.u:
        out[u["explain"]]["u"].append(u)
    for y in rep.y:
        out[y["explain"]]["y"].append(y)
    for r in rep.r:
        out[r["explain"]]["r"].setdefault(r["addr"], []).append((r["object"], r["edge"]))
    for y in rep.Y:
        if y["explain"] is not None:
            out[y["explain"]]["Y"] = y
    return out


class ExplainCycles(harness.ChildTestCase):
    def test_explains_and_changes_nothing(self):
        run = harness.run_child(__file__, {"fake_cudart": harness.fake_cudart_path()}, env=ENV)
        self.assertChildOk(run)
        r = run.result
        # Nothing the program sees changes.
        self.assertEqual(r["plain"]["dead"], [True] * 5)
        self.assertEqual(r["explained"], r["plain"])
        self.assertEqual(r["explained"]["events"], ["weakref", "del"])
        self.assertEqual(r["alive_diff"], {})
        # A program's own DEBUG_SAVEALL: its garbage stays in gc.garbage, no explanation.
        u = r["user_saveall"]
        self.assertGreater(u["kept"], 0)
        self.assertEqual(u["debug"], gc.DEBUG_SAVEALL)
        # Two explained collections (the warm-up's and the checked round's), each named by its Y.
        rep = run.need_report()
        ex = explanations(rep)
        self.assertEqual(len(ex), 2, ex)
        steps = [y for y in rep.Y if y["trigger"] == "step"]
        self.assertEqual(len(steps), 3)  # the third: the DEBUG_SAVEALL round, not explained
        self.assertIsNone(steps[2]["explain"])
        e = ex[max(ex)]
        self.assertIs(e["Y"], steps[1])
        self.assertTrue(e["j"]["complete"])
        self.assertEqual(e["j"]["cuda_bytes"], 8 * MIB)
        self.assertEqual(e["j"]["tensors"], 4)
        self.assertGreaterEqual(e["Y"]["collected"], e["j"]["objects"] - 5)  # the first pass's count
        groups = {}
        for g in e["u"]:
            groups.setdefault(g["kind"], {})[g["name"]] = g["count"]
        frames = [k for k in groups["frame"] if k.startswith("frame_cycle ")]
        self.assertEqual(len(frames), 1, groups["frame"])
        self.assertRegex(frames[0], r"test_explain_cycles\.py:\d+$")
        self.assertTrue(any(k.startswith("child.<locals>.closure_cycle.<locals>.step ") for k in groups["closure"]),
                        groups["closure"])
        self.assertEqual(groups["autograd_function"], {"torch.autograd.function.FBackward": 1})
        self.assertIn("type", groups)
        # What each group held: every storage is credited to its holder's group (the context holds its
        # saved input and, through its __dict__, its output).
        held = {(g["kind"], g["name"]): g["cuda_bytes"] for g in e["u"] if g["cuda_bytes"]}
        step = [k for k in groups["closure"] if k.startswith("child.<locals>.closure_cycle.<locals>.step ")][0]
        self.assertEqual(held, {("frame", frames[0]): 4 * MIB, ("closure", step): 2 * MIB,
                                ("autograd_function", "torch.autograd.function.FBackward"): 2 * MIB})
        firsts = {}  # per kind, the first group written: the one that held the most
        for g in e["u"]:
            firsts.setdefault(g["kind"], g)
        self.assertEqual(firsts["frame"]["name"], frames[0])
        sizes = sorted(t["size"] for t in e["y"])
        self.assertEqual(sizes, [MIB, MIB, 2 * MIB, 4 * MIB])
        self.assertEqual([t["size"] for t in e["y"]], sorted(sizes, reverse=True))  # largest first
        by_size = {}
        for t in e["y"]:
            by_size.setdefault(t["size"], []).append(t)
        four, two = by_size[4 * MIB][0], by_size[2 * MIB][0]
        chain4, chain2 = e["r"][four["addr"]], e["r"][two["addr"]]
        self.assertTrue(chain4[0][0].startswith("frame frame_cycle "), chain4)
        self.assertEqual(chain4[0][1], "local act")
        self.assertRegex(chain4[-1][0], r"^Tensor float32\[1048576\] \(4\.0 MiB\)$")
        self.assertIsNone(chain4[-1][1])
        self.assertTrue(chain2[0][0].startswith("function child.<locals>.closure_cycle.<locals>.step "), chain2)
        self.assertIn(("builtins.cell", "cell_contents"), chain2)
        saved = [t for t in by_size[MIB] if t["how"] == "saved"]
        self.assertEqual(len(saved), 1, by_size[MIB])
        self.assertEqual((saved[0]["holder"], saved[0]["category"]), ("FBackward", "activation"))
        self.assertEqual(e["r"][saved[0]["addr"]], [("torch.autograd.function.FBackward", ".saved_tensors"),
                                                     ("saved tensor", None)])
        kept = [t for t in by_size[MIB] if t["how"] == "tensor"][0]
        self.assertEqual(kept["category"], "other_tensor")
        self.assertIn(("torch.autograd.function.FBackward", "__dict__"), e["r"][kept["addr"]])

    def test_the_programs_collections_with_all(self):
        env = dict(ENV, MEMGUARD_EXPLAIN_CYCLES="all")
        run = harness.run_child(__file__, {"fake_cudart": harness.fake_cudart_path(), "all": True}, env=env)
        self.assertChildOk(run)
        self.assertEqual(run.result["dead"], [True] * 5)
        self.assertGreater(run.result["n"], 0)
        rep = run.need_report()
        explicit = [y for y in rep.Y if y["trigger"] == "explicit" and y["explain"] is not None]
        self.assertEqual(len(explicit), 1, rep.Y)
        self.assertEqual(explicit[0]["collected"], run.result["n"])
        self.assertIsNone(explicit[0]["skipped"])
        self.assertEqual(explanations(rep)[explicit[0]["explain"]]["j"]["cuda_bytes"], 8 * MIB)


if __name__ == "__main__":
    harness.main(child)
