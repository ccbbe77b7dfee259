"""7. Which processes write a report file.

No CUDA memory and no memguard collection: no file. Children (all under LD_PRELOAD, the hook
active, default report name in an empty working directory unless noted):
  plain     plain Python work (no torch), including explicit gc.collect() calls;
  eager     import torch, eager CPU ops with autograd, explicit gc.collect() calls;
  off       torch.compile on the CPU with MEMGUARD_COLLECT_COMPILE_GARBAGE=0 (no memguard
            collection, so no file either);
  compiled  torch.compile on the CPU only: memguard's collection creates the report, under the
            default name memguard.<exe>.<pid>.mgr, with the X and Y records, and the collections
            that happened before it existed written after the header.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def child(arm):
    import gc
    import threading

    import childlib

    childlib.no_automatic_full_collections()
    result = {"memguard_loaded": childlib.memguard_loaded(), "tid": threading.get_native_id()}
    kind = arm["kind"]
    if kind == "plain":
        data = [[i, str(i)] for i in range(20000)]
        for _ in range(3):
            cyc = []
            cyc.append(cyc)
            del cyc
            gc.collect()
        result["sum"] = sum(d[0] for d in data)
        return result
    import torch
    if kind == "eager":
        w = torch.randn(64, 64, requires_grad=True)
        for _ in range(5):
            loss = (torch.tanh(torch.randn(32, 64) @ w) ** 2).mean()
            loss.backward()
            gc.collect()
        result["grad"] = float(w.grad.sum()).hex()
        return result
    backend = childlib.LeakyBackend(1 << 16)

    def f(x):
        return torch.sin(x) * 2

    cf = torch.compile(f, backend=backend)
    cf(torch.randn(8))
    cf(torch.randn(8))
    result["compiled"] = [cid for cid, _ in backend.leaked]
    result["alive_after"] = backend.alive()
    return result


def files(run):
    return sorted(n for n in os.listdir(run.workdir) if n != "result.json" and not n.startswith("inductor"))


class ReportFile(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        on = {"MEMGUARD_COLLECT_COMPILE_GARBAGE": None}
        cls.runs = {
            "plain": harness.run_child(__file__, {"kind": "plain"}, output=False, env=on),
            "eager": harness.run_child(__file__, {"kind": "eager"}, output=False, env=on),
            "off": harness.run_child(__file__, {"kind": "compiled"}, output=False,
                                     env={"MEMGUARD_COLLECT_COMPILE_GARBAGE": "0"}),
            "compiled": harness.run_child(__file__, {"kind": "compiled"}, output=False, env=on),
        }

    def _check_nothing(self, name):
        run = self.runs[name]
        self.assertChildOk(run)
        self.assertTrue(run.result["memguard_loaded"], "libmemguard.so is mapped in the child")
        self.assertIn("Python hook active", run.stderr, "the hook was active")
        self.assertEqual(files(run), [], f"{name}: no report expected\n" + run.describe())

    def test_plain_python_writes_nothing(self):
        self._check_nothing("plain")

    def test_eager_torch_writes_nothing(self):
        self._check_nothing("eager")

    def test_compile_without_collection_writes_nothing(self):
        self._check_nothing("off")
        self.assertIn("compile 0/0 ended", self.runs["off"].stderr, "the compile was seen")

    def test_compile_only_writes_a_report(self):
        run = self.runs["compiled"]
        self.assertChildOk(run)
        exe = os.path.basename(os.path.realpath(sys.executable))
        self.assertEqual(files(run), [f"memguard.{exe}.{run.pid}.mgr"], run.describe())
        rep = harness.Report(os.path.join(run.workdir, files(run)[0]))
        self.assertEqual(rep.header, "MEMGUARD-REPORT 1")
        self.assertEqual(rep.encoding, "binary", "the library writes binary by default (MEMGUARD_REPORT_ENCODING)")
        self.assertEqual(rep.info.get("pid"), str(run.pid))
        self.assertTrue(rep.ended, "Z record at exit")
        self.assertEqual(rep.A, [], "no CUDA allocation")
        tid = run.result["tid"]
        self.assertEqual([cid for _, t, cid in rep.X if t == tid], run.result["compiled"])
        mg = rep.memguard_Y()
        self.assertEqual(len(mg), 1, mg)
        self.assertEqual(mg[0]["compile_ids"], run.result["compiled"])
        self.assertEqual(run.result["alive_after"], 0)
        # collections from before the file existed (start-up, dynamo's gc.collect(1)) come first
        before = [y for y in rep.Y if y["t"] < mg[0]["t"]]
        self.assertTrue(any(y["trigger"] == "automatic" for y in before))
        self.assertTrue(any(y["trigger"] == "explicit" and y["generation"] == 1 for y in before))
        ts = [y["t"] for y in rep.Y if y["tid"] == tid]
        self.assertEqual(ts, sorted(ts), "Y records of one thread in time order")


if __name__ == "__main__":
    harness.main(child)
