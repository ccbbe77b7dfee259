"""21. Collections after a recomputed backward and every N steps, and their time budget; real CPU torch.

Children (under LD_PRELOAD, automatic collection off so that only memguard's collections free; the
functional arms with MEMGUARD_GC_BUDGET=1, so that the budget never skips):
  recompute  three layers checkpointed by torch.utils.checkpoint (use_reentrant=True) and three by a
             Megatron-style CheckpointFunction defined after torch loaded; each layer's recompute
             plants a cycle holding its recomputed activation. With the trigger on, each cycle is
             freed before the next layer's backward recomputes; with MEMGUARD_COLLECT_RECOMPUTE_GARBAGE=0
             none is freed during the backward. The same backward inside a stream capture (the fake
             CUDA runtime's, begun through the process's global scope as PyTorch's calls are) and
             inside a dynamo compile context frees nothing until it ends: the safety rules.
  steps      MEMGUARD_GC_EVERY_STEPS=2: a cycle planted at each memguard.step() is freed at steps
             2 and 4, not at 1 and 3; the report's Y records have trigger step.
  budget     MEMGUARD_GC_EVERY_STEPS=1 with a budget of 1e-9 (always over it): collections that free
             no CUDA memory back off (skip 1, 2, 4 chances); a collection whose cycle holds (fake)
             CUDA memory, freed by a finalizer, restores the trigger (the next steps collect again).
"""
import os
import sys
import weakref

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


class Node:
    pass


def budget_child(arm):
    """Every step plants a cycle without CUDA memory, except step 11 (a chance the back-off leaves to
    collect), whose cycle holds a fake cudaMalloc buffer freed by its finalizer."""
    import ctypes
    import gc
    import memguard
    gc.disable()
    ctypes.CDLL(arm["fake_cudart"])  # the fake runtime, loaded as PyTorch loads the real one
    glob = ctypes.CDLL(None)         # libmemguard.so's cudaMalloc/cudaFree first
    glob.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    glob.cudaFree.argtypes = [ctypes.c_void_p]
    keep = ctypes.c_void_p()
    glob.cudaMalloc(ctypes.byref(keep), 1 << 20)  # CUDA in use, as in training
    freed = []
    for i in range(1, 17):
        n = Node()
        n.self = n
        if i == 11:
            p = ctypes.c_void_p()
            assert glob.cudaMalloc(ctypes.byref(p), 64 << 20) == 0
            n.buf = p.value
            weakref.finalize(n, lambda v=p.value, i=i: (glob.cudaFree(ctypes.c_void_p(v)), freed.append(i)))
        del n
        memguard.step()
    return {"freed": freed}


def child(arm):
    import gc
    import torch
    import torch.utils.checkpoint as cp
    gc.disable()
    events = []
    if arm["kind"] == "budget":
        return budget_child(arm)
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

    def forward():
        h = torch.randn(4, 32, requires_grad=True)
        for i in range(3):
            h = cp.checkpoint(layer(f"t{i}"), h, use_reentrant=True)
        for i in range(3):
            h = CheckpointFunction.apply(layer(f"m{i}"), h)
        return h

    out = {}
    h = forward()
    h.sum().backward()
    events.append("backward done")
    out["events"] = list(events)
    if arm.get("fake_cudart"):  # inside a capture: nothing collected until it ends
        import ctypes
        fake = ctypes.CDLL(arm["fake_cudart"])
        glob = ctypes.CDLL(None)
        begin, end = glob.cudaStreamBeginCapture, glob.cudaStreamEndCapture
        begin.argtypes = [ctypes.c_void_p, ctypes.c_int]
        end.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
        stream, graph = ctypes.c_void_p(), ctypes.c_void_p()
        assert fake.cudaStreamCreate(ctypes.byref(stream)) == 0
        events.clear()
        h = forward()
        assert begin(stream, 0) == 0
        h.sum().backward()
        events.append("backward done")
        assert end(stream, ctypes.byref(graph)) == 0
        h = forward()  # after the capture: collected again (and the capture's cycles with the first)
        h.sum().backward()
        events.append("second backward done")
        out["capture_events"] = list(events)
        # Inside a dynamo compile context (what dynamo sets while it traces or compiles).
        from torch._guards import CompileContext, CompileId, compile_context
        events.clear()
        h = forward()
        with compile_context(CompileContext(CompileId(frame_id=0, frame_compile_id=0))):
            h.sum().backward()
        events.append("backward done")
        out["compile_events"] = list(events)
    return out


ORDER = ["m2", "m1", "m0", "t2", "t1", "t0"]


class Test(harness.ChildTestCase):
    def run_kind(self, kind, env=None, arm=None, key="events"):
        e = {"MEMGUARD_GC_BUDGET": "1"}
        e.update(env or {})
        run = harness.run_child(__file__, dict(arm or {}, kind=kind), env=e)
        self.assertChildOk(run)
        self.last = run
        return run.result[key] if key else run.result

    def test_recompute_frees_before_the_next_backward(self):
        ev = self.run_kind("recompute")
        expected = []
        for tag in ORDER:
            expected += [f"recompute {tag}", f"freed {tag}"]
        self.assertEqual(ev, expected + ["backward done"])
        ys = [y for y in self.last.need_report().Y if y["trigger"] == "recompute"]
        self.assertEqual(len(ys), 6, ys)
        self.assertTrue(all(y["generation"] == 2 and y["skipped"] == 0 for y in ys), ys)

    def test_not_during_a_capture_or_a_compile(self):
        r = self.run_kind("recompute", arm={"fake_cudart": harness.fake_cudart_path()}, key=None)
        ev = r["capture_events"]
        done = ev.index("backward done")
        self.assertEqual([e for e in ev[:done] if e.startswith("freed")], [], ev)
        # After the capture ended, the next backward's first collection frees the capture's cycles too.
        after = ev[done + 1:]
        self.assertEqual(sorted(e for e in after if e.startswith("freed")),
                         sorted([f"freed {t}" for t in ORDER] * 2), ev)
        self.assertEqual(after[:3][0], "recompute m2")
        ev = r["compile_events"]
        done = ev.index("backward done")
        self.assertEqual([e for e in ev[:done] if e.startswith("freed")], [], ev)

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
        ys = [y for y in self.last.need_report().Y if y["trigger"] == "step"]
        self.assertEqual([y["generation"] for y in ys], [2, 2])

    def test_budget_backs_off_and_restores(self):
        r = self.run_kind("budget", env={"MEMGUARD_GC_EVERY_STEPS": "1", "MEMGUARD_GC_BUDGET": "1e-9",
                                         "MEMGUARD_EXPLAIN_CYCLES": "0"},
                          arm={"fake_cudart": harness.fake_cudart_path()}, key=None)
        rep = self.last.need_report()
        self.assertEqual(rep.info.get("gc_budget"), "1e-09")
        ys = [y for y in rep.Y if y["trigger"] == "step"]
        # Steps 1, 3, 6 and 11 collect (skipping 0, 1, 2 and 4 chances before them): each of the
        # first three freed no CUDA memory while over the budget, doubling the back-off; step 11's
        # frees the fake buffer, which restores the trigger: step 12 collects with no skip.
        self.assertEqual(r["freed"], [11])
        skipped = [y["skipped"] for y in ys]
        self.assertEqual(skipped[:5], [0, 1, 2, 4, 0], ys)
        freeing = [y for y in ys if (y["cuda_bytes_freed"] or 0) >= 64 << 20]
        self.assertEqual(len(freeing), 1, ys)
        after = ys[ys.index(freeing[0]) + 1:]
        self.assertTrue(after and after[0]["skipped"] == 0, ys)


if __name__ == "__main__":
    harness.main(child)
