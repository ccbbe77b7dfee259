"""1. Compile garbage under per-layer torch.compile and reentrant checkpointing (compile_garbage.py's
shape, small sizes).

Every compile leaves a reference cycle holding a real tensor; it is reachable until the compiled
code first runs, so dynamo's own post-compile gc.collect(1) promotes it to the oldest generation.
Checks, with the hook on: the held tensors are gone before each layer's backward starts (checked
from inside backward) and after each call; the report has an X record per compile and `Y ...
memguard` records naming exactly those compile ids. With MEMGUARD_COLLECT_COMPILE_GARBAGE=0: the
tensors outlive the call, in the oldest generation, although dynamo's gc.collect(1) ran after every
compile (and another gc.collect(1) does not free them; a full collection does). Losses and
gradients are bitwise equal between the arms.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

LAYERS = 3
WIDTH = 64
HOLD = 1 << 18  # floats per compile: 1 MiB


def child(arm):
    import gc
    import threading

    import torch
    import torch.nn as nn
    import torch.utils.checkpoint as cp

    import childlib

    childlib.no_automatic_full_collections()
    torch.manual_seed(0)
    backend = childlib.LeakyBackend(HOLD)
    ends = childlib.EndCallbacks()
    state = {"phase": "setup"}
    alive_at_backward = []

    @torch._dynamo.disable
    def graph_break():
        pass

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(WIDTH, WIDTH)

        def forward(self, x):
            h = torch.tanh(self.lin(x))
            graph_break()
            return h * torch.sigmoid(h)

    class CheckAtBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            alive_at_backward.append(backend.alive())
            return g

    def run_layer(layer, x):
        return CheckAtBackward.apply(layer(x))

    layers = [Layer() for _ in range(LAYERS)]
    compiled = [torch.compile(l, backend=backend, dynamic=False) for l in layers]
    x = torch.randn(32, WIDTH)
    probe = childlib.GcProbe(lambda: {"phase": state["phase"], "alive": backend.alive(),
                                      "compiling": childlib.compiling(),
                                      "convert_frame": childlib.convert_frame_on_stack()}).start()
    result = {"tid": threading.get_native_id(), "calls": []}
    for call in range(2):
        alive_at_backward.clear()
        n_before = len(backend.leaked)
        state["phase"] = f"call{call}.forward"
        h = x.clone().requires_grad_()
        for c in compiled:
            h = cp.checkpoint(run_layer, c, h, use_reentrant=True)
        loss = h.pow(2).mean()
        state["phase"] = f"call{call}.backward"
        loss.backward()
        state["phase"] = f"call{call}.after"
        grads = [p.grad.clone() for l in layers for p in l.parameters()]
        for l in layers:
            l.zero_grad(set_to_none=True)
        rec = {"loss": float(loss.item()).hex(),
               "grads": [float(g.double().sum().item()).hex() for g in grads],
               "grad_bytes_hash": hash(b"".join(g.numpy().tobytes() for g in grads)),
               "compiled": len(backend.leaked) - n_before,
               "alive_at_backward": list(alive_at_backward),
               "alive_after": backend.alive()}
        del h, loss, grads
        result["calls"].append(rec)
    # Without the hook the garbage is still there: show where it lives and what frees it.
    state["phase"] = "end"
    result["alive_end"] = backend.alive()
    gc.collect(1)
    result["alive_after_gen1"] = backend.alive()
    scratch_ids = {id(r()) for _, r in backend.leaked if r() is not None}
    oldest = gc.get_objects(generation=2)
    result["cycles_in_oldest"] = sum(1 for o in oldest if type(o) is dict and "compile_id" in o
                                     and id(o.get("scratch")) in scratch_ids)
    del oldest
    result["probe"] = probe.stop()
    gc.collect()
    result["alive_after_full"] = backend.alive()
    result["leaked_ids"] = [cid for cid, _ in backend.leaked]
    result["ends"] = ends.events
    return result


class CompileGarbageCheckpoint(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        # The recompute trigger (issue 21) would also free this garbage after each checkpointed
        # backward: off in both arms, which measure the compile trigger alone.
        off = {"MEMGUARD_COLLECT_RECOMPUTE_GARBAGE": "0"}
        cls.on = harness.run_child(__file__, {}, env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": None, **off})
        cls.off = harness.run_child(__file__, {}, env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": "0", **off})

    def test_hook_frees_before_each_backward_and_after_the_call(self):
        run = self.on
        self.assertChildOk(run)
        r = run.result
        cold = r["calls"][0]
        self.assertGreaterEqual(cold["compiled"], 4, "forward and backward-recompute compiles expected")
        for i, c in enumerate(r["calls"]):
            self.assertEqual(len(c["alive_at_backward"]), LAYERS)
            self.assertEqual(c["alive_at_backward"], [0] * LAYERS,
                             f"call {i}: held tensors alive when a layer's backward started\n" + run.describe())
            self.assertEqual(c["alive_after"], 0, f"call {i}: held tensors alive after the call")

    def test_report_names_the_compiles(self):
        run = self.on
        self.assertChildOk(run)
        rep = run.need_report()
        tid = run.result["tid"]
        x_ids = [cid for _, t, cid in rep.X if t == tid]
        self.assertEqual(sorted(x_ids), sorted(run.result["leaked_ids"]), "one X record per compile")
        mg = rep.memguard_Y()
        self.assertTrue(mg, "no memguard collection in the report\n" + run.describe())
        named = [cid for y in mg for cid in y["compile_ids"]]
        self.assertEqual(sorted(named), sorted(x_ids), "memguard's Y records name each compile once")
        for y in mg:
            self.assertEqual(y["tid"], tid)
            self.assertEqual(y["generation"], 2)
            self.assertIsNotNone(y["mark_age_ns"])
            self.assertGreater(y["collected"], 0)

    def test_memguard_collections_at_safe_points(self):
        run = self.on
        self.assertChildOk(run)
        ys = run.align(run.result["probe"])
        mine = [(e, y) for e, y in zip(run.result["probe"], ys) if y["trigger"] == "memguard"]
        self.assertTrue(mine)
        for e, y in mine:
            self.assertFalse(e["ctx"]["compiling"], f"memguard collected while compiling: {e}")
            self.assertFalse(e["ctx"]["convert_frame"], f"memguard collected inside convert_frame: {e}")
            self.assertGreater(e["ctx"]["alive"], 0, f"a memguard collection found no garbage: {e} {y}")
        phases = sorted({e["ctx"]["phase"] for e, _ in mine})
        self.assertEqual(phases, ["call0.backward", "call0.forward"], "collections in the cold call only")

    def test_without_hook_garbage_outlives_the_call_in_oldest_generation(self):
        run = self.off
        self.assertChildOk(run)
        r = run.result
        cold = r["calls"][0]
        self.assertGreater(max(cold["alive_at_backward"]), 0, "garbage expected at backward without the hook")
        self.assertEqual(cold["alive_after"], cold["compiled"], "all held tensors outlive the call")
        n = len(r["leaked_ids"])
        self.assertEqual(r["alive_end"], n)
        self.assertEqual(r["alive_after_gen1"], n, "a generation-1 collection must not free them")
        self.assertEqual(r["cycles_in_oldest"], n, "the cycles are in the oldest generation")
        self.assertEqual(r["alive_after_full"], 0, "a full collection frees them: they are garbage")
        # No CUDA and no memguard collection: no report at all.
        self.assertEqual(run.reports, [], "no report expected with the toggle off on the CPU")
        # dynamo's own gc.collect(1) ran after every compile (generation-1 collections inside
        # convert_frame) and did not free them.
        dynamo_gen1 = [e for e in r["probe"] if e["generation"] == 1 and e["ctx"]["convert_frame"]]
        self.assertGreaterEqual(len(dynamo_gen1), n, "dynamo's gc.collect(1) after each compile")

    def test_losses_bitwise_equal(self):
        self.assertChildOk(self.on)
        self.assertChildOk(self.off)
        for a, b in zip(self.on.result["calls"], self.off.result["calls"]):
            self.assertEqual(a["loss"], b["loss"])
            self.assertEqual(a["grads"], b["grads"])
            self.assertEqual(a["grad_bytes_hash"], b["grad_bytes_hash"])


if __name__ == "__main__":
    harness.main(child)
