"""8. A lazy backward compile (CallbackTrigger.LAZY_BACKWARD) is collected on the thread that ran it.

With an aot_autograd backend, AOTAutograd compiles the backward graph lazily, when backward first
runs (no symbolic sizes are saved for backward, so nothing forces an eager backward compile); dynamo
runs its end-of-compile callbacks with trigger LAZY_BACKWARD on the thread that executes the
backward node. On the CPU the autograd engine runs a CPU-only graph on the thread that called
backward(), so the "autograd thread" here is a worker thread that calls loss.backward(): the test
checks that the lazy compile is marked and collected on that worker, not on the main thread.

Two kinds of garbage from the backward compiler (both cycles holding a tensor, promoted to the
oldest generation by a gc.collect(1) in the compiler):
  dropped_at_compile  unreachable once the compiler returns: freed by memguard's collection;
  dropped_at_run      reachable until the compiled backward first runs (as the forward compiles'
                      garbage in the other tests): see test_run_garbage_freed_by_end_of_backward.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def child(arm):
    import threading

    import torch
    from torch._dynamo.backends.common import aot_autograd

    import childlib

    childlib.no_automatic_full_collections()
    ends = childlib.EndCallbacks()
    fw = childlib.LeakyBackend(1 << 16, promote=True, boxed=True)
    bw_compile = childlib.LeakyBackend(1 << 16, promote=True, boxed=True, until_run=False)
    bw_run = childlib.LeakyBackend(1 << 16, promote=True, boxed=True, until_run=True)

    def bw_compiler(gm, example_inputs):
        bw_compile(gm, example_inputs)  # its cycle is garbage when this returns
        return bw_run(gm, example_inputs)  # this one when the compiled backward first runs

    def f(x, w):
        return (torch.tanh(x @ w) ** 2).mean()

    cf = torch.compile(f, backend=aot_autograd(fw_compiler=fw, bw_compiler=bw_compiler))
    x = torch.randn(8, 16)
    w = torch.randn(16, 16, requires_grad=True)
    loss = cf(x, w)
    out = {"main_tid": threading.get_native_id(), "fw_alive_after_forward": fw.alive()}

    def run_backward():
        out["bw_compiles_before"] = bw_compile.compiles
        loss.backward()
        out["worker_tid"] = threading.get_native_id()
        out["bw_compiles"] = bw_compile.compiles
        out["dropped_at_compile_alive"] = bw_compile.alive()
        out["dropped_at_run_alive"] = bw_run.alive()
        out["profile_after"] = childlib.profile_owner()

    t = threading.Thread(target=run_backward)
    t.start()
    t.join()
    out["grad"] = float(w.grad.sum()).hex()
    out["ends"] = ends.events
    return out


class LazyBackward(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        cls.run_ = harness.run_child(__file__, {}, env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": None})

    def lazy_end(self):
        lazy = [e for e in self.run_.result["ends"] if e["trigger"] == "LAZY_BACKWARD"]
        self.assertEqual(len(lazy), 1, self.run_.result["ends"])
        return lazy[0]

    def test_backward_compiled_lazily_on_the_worker(self):
        run = self.run_
        self.assertChildOk(run)
        r = run.result
        self.assertEqual(r["bw_compiles_before"], 0, "the backward was not compiled with the forward")
        self.assertEqual(r["bw_compiles"], 1)
        lazy = self.lazy_end()
        self.assertEqual(lazy["tid"], r["worker_tid"])
        self.assertNotEqual(r["worker_tid"], r["main_tid"])
        self.assertEqual(lazy["profile"], "memguard", "the lazy compile marked the worker")

    def test_collected_on_the_worker(self):
        run = self.run_
        self.assertChildOk(run)
        r = run.result
        lazy = self.lazy_end()
        rep = run.need_report()
        self.assertIn((r["worker_tid"], lazy["compile_id"]), [(tid, cid) for _, tid, cid in rep.X])
        on_worker = [y for y in rep.memguard_Y() if y["tid"] == r["worker_tid"]]
        self.assertEqual(len(on_worker), 1, rep.memguard_Y())
        self.assertEqual(on_worker[0]["compile_ids"], [lazy["compile_id"]])
        self.assertEqual(r["dropped_at_compile_alive"], 0, "the lazy compile's garbage was freed")
        self.assertEqual(r["profile_after"], "none")
        on_main = [y for y in rep.memguard_Y() if y["tid"] == r["main_tid"]]
        self.assertEqual(len(on_main), 1, "the forward compile: one collection on the main thread")
        self.assertEqual(r["fw_alive_after_forward"], 0)

    def test_run_garbage_freed_by_end_of_backward(self):
        """A lazy backward mark waits for the outermost AOTAutograd runtime frame
        (CompiledFunction.backward) to return, so garbage that stays reachable until the compiled
        backward first runs is freed too: nothing is alive after loss.backward() returned."""
        run = self.run_
        self.assertChildOk(run)
        self.assertEqual(run.result["dropped_at_run_alive"], 0)


if __name__ == "__main__":
    harness.main(child)
