"""The user's line (docs/user-line.md): the interpreter's paths are written as e records, and the
user frame of an allocation made inside a torch.compile'd function is that function, marked
compiled, even though the allocation happens in a library's operator called from inductor's
generated code.

The library operator (site-packages/mgtest_lib_op.py) calls cudaMalloc of the fake runtime with the
GIL held; `compiled_fn` here calls it and is compiled with inductor; `eager_fn` calls it eagerly.
`memguard top --at exit --json` must name compiled_fn (compiled) and eager_fn (at its call line).
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {"compiled": (1 << 20) + 4096, "eager": (1 << 20) + 8192}


def child(arm):
    import site
    import sysconfig

    sys.path.insert(0, os.path.join(HERE, "site-packages"))
    import torch
    import mgtest_lib_op

    mgtest_lib_op.setup(arm["fake_cudart"])

    def compiled_fn(x):
        return torch.ops.mgtest.alloc(x, SIZES["compiled"]) * 2

    def eager_fn(x):
        return torch.ops.mgtest.alloc(x, SIZES["eager"]); line = sys._getframe().f_lineno  # noqa: E702,F841

    out = {"file": os.path.abspath(__file__)}
    out["compiled_def_line"] = compiled_fn.__code__.co_firstlineno
    out["eager_line"] = eager_fn.__code__.co_firstlineno + 1
    torch.compile(compiled_fn, backend="inductor")(torch.ones(4))
    eager_fn(torch.ones(4))
    out["stdlib"] = sysconfig.get_paths()["stdlib"]
    out["site"] = site.getsitepackages()
    out["prefix"] = sys.prefix
    out["torch"] = os.path.dirname(os.path.abspath(torch.__file__))
    out["inductor_cache"] = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    return out


class UserFrame(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        cls.run_ = harness.run_child(__file__, {"fake_cudart": harness.fake_cudart_path()})

    def test_paths_recorded(self):
        run = self.run_
        self.assertChildOk(run)
        rep = run.need_report()
        paths = {}
        with harness.open_report(rep.path) as f:
            for line in f:
                w = line.rstrip("\n").split(" ")
                if w[0] == "e":
                    paths.setdefault(w[1], set()).add(harness._dec(w[2]))
        r = run.result
        self.assertIn(os.path.abspath(r["stdlib"]), paths.get("stdlib", ()), paths)
        for p in r["site"]:
            self.assertIn(os.path.abspath(p), paths.get("site", ()), paths)
        self.assertIn(os.path.abspath(r["prefix"]), paths.get("prefix", ()), paths)
        self.assertIn(r["torch"], paths.get("torch", ()), paths)
        self.assertIn(os.path.abspath(r["inductor_cache"]), paths.get("inductor_cache", ()), paths)

    def site_of(self, top, size):
        for s in top["sites"]:
            if s["bytes"] == size:
                return s
        self.fail(f"no site of {size} bytes in {json.dumps(top, indent=1)[:4000]}")

    def test_user_frames(self):
        run = self.run_
        self.assertChildOk(run)
        cli = os.environ["MGTEST_CLI"]
        p = subprocess.run([cli, "top", "--at", "exit", "--json", run.need_report().path],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        top = json.loads(p.stdout)
        r = run.result
        compiled = self.site_of(top, SIZES["compiled"])["user_frame"]
        self.assertEqual((compiled["function"], compiled["file"], compiled["line"], compiled["compiled"]),
                         ("compiled_fn", r["file"], r["compiled_def_line"], True), compiled)
        eager = self.site_of(top, SIZES["eager"])["user_frame"]
        self.assertEqual((eager["function"], eager["file"], eager["line"], eager["compiled"]),
                         ("eager_fn", r["file"], r["eager_line"], False), eager)


if __name__ == "__main__":
    harness.main(child)
