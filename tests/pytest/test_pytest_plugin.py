"""The pytest plugin (python/memguard/pytest_plugin.py), run as users run it: `python -m pytest
--memguard` in a fresh process without LD_PRELOAD (the plugin re-runs pytest under the library),
on test files whose tests allocate through the fake CUDA runtime (fake_cuda_cases.py) or use real
PyTorch on the CPU (torch_cpu_cases.py). The package comes from the source tree (PYTHONPATH), so
the plugin is named with `-p memguard.pytest_plugin` and the library with --memguard-library.

Each CTest test (pytest.<name>) runs one method: `test_pytest_plugin.py PluginTest.test_<name>`.

Environment (set by CTest): MGTEST_LIB (libmemguard.so, with the memguard command at ../bin),
MGTEST_FAKE_CUDART (the fake libcudart.so.13), MGTEST_PYTHON_DIR (the source tree's python/).
MGTEST_KEEP=1 keeps the runs' directories (printed).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP_RC = 77
MiB = 1 << 20

_DROP_PREFIXES = ("MEMGUARD_", "_MEMGUARD_", "PYTEST_", "TORCH", "PYTORCH_", "MGTEST_")
_DROP = {"LD_PRELOAD", "PYTHONPATH", "PYTHONSTARTUP", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS"}


def _need(name):
    p = os.environ.get(name)
    if not p or not os.path.exists(p):
        raise RuntimeError(f"{name} must be set (CTest sets it)")
    return os.path.abspath(p)


class Run:
    """One `python -m pytest` in a fresh directory: its exit code, output and junit outcomes."""

    def __init__(self, cases, args, env_extra=None, files=None):
        self.dir = tempfile.mkdtemp(prefix="mgtest_pytest_")
        for case in cases:
            shutil.copy(os.path.join(HERE, case), self.dir)
        for name, text in (files or {}).items():
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(text)
        with open(os.path.join(self.dir, "pytest.ini"), "w") as f:
            f.write("[pytest]\n")  # this directory's own configuration: nothing from the checkout
        env = {k: v for k, v in os.environ.items() if k not in _DROP and not k.startswith(_DROP_PREFIXES)}
        env.update(PYTHONPATH=_need("MGTEST_PYTHON_DIR"), MGTEST_FAKE_CUDART=_need("MGTEST_FAKE_CUDART"),
                   PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
        env.update(env_extra or {})
        cmd = [sys.executable, "-m", "pytest", "-p", "memguard.pytest_plugin", "-p", "no:cacheprovider",
               "--strict-markers", "-c", "pytest.ini", "--rootdir", ".", "--junitxml=junit.xml", *args,
               *[c for c in cases + list(files or {}) if c.endswith(".py")]]
        r = subprocess.run(cmd, cwd=self.dir, env=env, capture_output=True, text=True, timeout=300)
        self.rc, self.out, self.err = r.returncode, r.stdout, r.stderr
        self.outcomes, self.messages = {}, {}
        junit = os.path.join(self.dir, "junit.xml")
        if os.path.exists(junit):
            for case in ET.parse(junit).getroot().iter("testcase"):
                failed = case.find("failure")
                self.outcomes[case.get("name")] = ("failed" if failed is not None else
                                                   "skipped" if case.find("skipped") is not None else "passed")
                if failed is not None:
                    self.messages[case.get("name")] = (failed.get("message") or "") + "\n" + (failed.text or "")
        self.reports = sorted(f for f in os.listdir(self.dir) if f.endswith(".mgr"))
        if os.environ.get("MGTEST_KEEP") == "1":
            print(f"kept: {self.dir}")

    def text(self):
        return f"exit {self.rc}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"

    def cleanup(self):
        if os.environ.get("MGTEST_KEEP") != "1":
            shutil.rmtree(self.dir, ignore_errors=True)


def skip(why):
    """Ends the run with 77, CTest's skip (unittest would turn SystemExit into an error)."""
    print(f"SKIP: {why}", flush=True)
    os._exit(SKIP_RC)


def cli():
    return os.path.join(os.path.dirname(os.path.dirname(_need("MGTEST_LIB"))), "bin", "memguard")


class PluginTest(unittest.TestCase):
    def run_pytest(self, cases, args, **kw):
        r = Run(cases, args, **kw)
        self.addCleanup(r.cleanup)
        return r

    def memguard_args(self):
        return ["--memguard", "--memguard-library", _need("MGTEST_LIB")]

    def test_markers(self):
        """Each marker passes and fails where it should, failures name the allocation sites, the
        summary lists the tests by incremental peak, and each test is a phase of the report."""
        r = self.run_pytest(["fake_cuda_cases.py"], self.memguard_args() + ["--memguard-top", "3"])
        self.assertEqual(r.rc, 1, r.text())
        self.assertIn(f"memguard: {_need('MGTEST_LIB')}", r.out, "the session ran under the library: re-exec")
        self.assertEqual(len(r.outcomes), 9, r.text())
        for name, outcome in r.outcomes.items():
            self.assertEqual(outcome, "failed" if name.endswith("_fails") else "passed", f"{name}\n{r.text()}")

        memory = r.messages["test_memory_fails"]
        self.assertIn("limit_gpu_memory: incremental peak 6.00 MiB is over the limit of 4.00 MiB", memory)
        self.assertRegex(memory, r"#1 +3\.00 MiB +1 block +__init__ at \S+fake_cuda_cases\.py:\d+ <- big_allocation at")
        self.assertRegex(memory, r"#2 +3\.00 MiB +1 block .* <- test_memory_fails at")
        leaks = r.messages["test_leaks_fails"]
        self.assertIn("limit_gpu_leaks: 4.00 MiB more live after the test (after gc.collect()) than at its "
                      "start, over the limit of 1.00 MiB", leaks)
        self.assertRegex(leaks, r"sites still live after the test, allocated during it:\n +#1 +4\.00 MiB +1 block "
                                r"+__init__ at \S+:\d+ <- leaky_allocation at")
        self.assertNotIn("#2", leaks, "only what the test left: the 512 KiB of test_leaks_passes came before")
        cycles = r.messages["test_cycles_fails"]
        self.assertIn("no_tensor_cycles: garbage collections during the test (and the one at its end) freed "
                      "2.00 MiB", cycles)
        self.assertRegex(cycles, r"#1 +2\.00 MiB +1 block +__init__ at \S+:\d+ <- cyclic_allocation at")

        rows = re.findall(r"^ *(\S+ \S+) +(\S+ \S+) +(\S+(?: \S+)?) +memguard +(\S+)$", r.out, re.M)
        self.assertIn("Tests by incremental CUDA memory peak (top 3 of 9):", r.out, r.text())
        self.assertEqual([(row[0], row[3]) for row in rows], [
            ("16.00 MiB", "fake_cuda_cases.py::test_unmarked_largest_passes"),
            ("8.00 MiB", "fake_cuda_cases.py::test_leaks_after_collection_passes"),
            ("6.00 MiB", "fake_cuda_cases.py::test_memory_fails")], r.text())

        self.assertEqual(len(r.reports), 1, r.text())
        self.assertIn(f"report: {r.reports[0]}", r.out)
        phases = json.loads(subprocess.run([cli(), "phases", os.path.join(r.dir, r.reports[0]), "--json"],
                                           capture_output=True, text=True, check=True).stdout)
        by_name = {p["name"]: p for p in phases}
        self.assertEqual(sorted(by_name), sorted(f"fake_cuda_cases.py::{n}" for n in r.outcomes))
        largest = by_name["fake_cuda_cases.py::test_unmarked_largest_passes"]
        self.assertEqual(largest["incremental_peak_bytes"], 16 * MiB, "the report agrees with the plugin")
        self.assertEqual(by_name["fake_cuda_cases.py::test_memory_is_incremental_passes"]["entry_bytes"] -
                         by_name["fake_cuda_cases.py::test_memory_passes"]["entry_bytes"], 8 * MiB,
                         "the module fixture's 8 MiB is live at the start of the incremental test")

    def test_sizes(self):
        """The markers read sizes as `memguard check` does: the same value, or both refuse."""
        sys.path.insert(0, _need("MGTEST_PYTHON_DIR"))
        try:
            from memguard.pytest_plugin import parse_size
        finally:
            sys.path.pop(0)
        golden = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "report", "golden",
                              "basic.mgr")
        for text in ["2 GiB", "64MiB", "1.5 GB", "4096", "0.1 KiB", " 3 kib ", "1.123456789012345678 TB",
                     "18446744073709551615", "18446744073709551616", "16 EiB", ".5", "1.", "2G", "-1", "1e3",
                     "1,000", ""]:
            p = subprocess.run([cli(), "check", golden, "--max-peak", text, "--json"], capture_output=True, text=True)
            try:
                ours = parse_size(text)
            except ValueError:
                ours = None
            theirs = json.loads(p.stdout)["limits"]["max_peak_bytes"] if p.returncode in (0, 1) else None
            self.assertEqual(ours, theirs, f"{text!r}: plugin {ours}, memguard check {theirs} ({p.stderr.strip()})")

    def test_without_option(self):
        """Without --memguard the plugin does nothing: no preload, no report, markers are no-ops (and
        registered: --strict-markers accepts them)."""
        r = self.run_pytest(["fake_cuda_cases.py"], [])
        self.assertEqual(r.rc, 0, r.text())
        self.assertEqual(set(r.outcomes.values()), {"passed"}, r.text())
        self.assertEqual(len(r.outcomes), 9)
        self.assertNotIn("memguard", r.out.lower(), r.text())
        self.assertEqual(r.reports, [], "the library was not loaded")

    def test_inactive(self):
        """Preloaded but not recording (MEMGUARD_ENABLE=0): no re-exec, said once, nothing checked."""
        r = self.run_pytest(["fake_cuda_cases.py"], self.memguard_args(),
                            env_extra={"LD_PRELOAD": _need("MGTEST_LIB"), "MEMGUARD_ENABLE": "0"})
        self.assertEqual(r.rc, 0, r.text())
        self.assertEqual(set(r.outcomes.values()), {"passed"}, r.text())
        self.assertEqual(r.out.count("memguard does not record in this process"), 1, r.text())
        self.assertEqual(r.reports, [])

    def test_bad_marker(self):
        """A limit that is not a size stops the session before any test runs, naming the test."""
        bad = ("import pytest\n\n@pytest.mark.limit_gpu_memory('2 GB/s')\ndef test_x():\n    pass\n")
        r = self.run_pytest([], self.memguard_args(), files={"bad_cases.py": bad})
        self.assertEqual(r.rc, 4, r.text())
        self.assertIn("memguard: @pytest.mark.limit_gpu_memory of bad_cases.py::test_x: bad size '2 GB/s'", r.err,
                      r.text())

    def test_library_problems(self):
        """A library path that does not exist, or a file the loader refuses: one clear error, no
        exec loop."""
        r = self.run_pytest(["fake_cuda_cases.py"], ["--memguard", "--memguard-library", "/nonexistent/libmemguard.so"])
        self.assertEqual(r.rc, 4, r.text())
        self.assertIn("memguard: --memguard needs libmemguard.so: /nonexistent/libmemguard.so does not exist", r.err)
        r = self.run_pytest(["fake_cuda_cases.py"], ["--memguard", "--memguard-library", "not_a_library.so"],
                            files={"not_a_library.so": "text\n"})
        self.assertEqual(r.rc, 4, r.text())
        self.assertIn("but libmemguard.so is not loaded", r.err, r.text())
        self.assertEqual(r.outcomes, {})

    def test_xdist(self):
        """pytest-xdist: the controller re-runs under the library, the workers inherit the preload
        and write a report each, and the controller's summary gathers every worker's tests."""
        probe = subprocess.run([sys.executable, "-c", "import xdist"], capture_output=True, text=True)
        if probe.returncode != 0:
            skip(f"pytest-xdist is not installed for {sys.executable}")
        r = self.run_pytest(["fake_cuda_cases.py"], self.memguard_args() + ["-n", "2"])
        self.assertEqual(r.rc, 1, r.text())
        for name, outcome in r.outcomes.items():
            self.assertEqual(outcome, "failed" if name.endswith("_fails") else "passed", f"{name}\n{r.text()}")
        self.assertIn("big_allocation at", r.messages["test_memory_fails"])
        self.assertIn("Tests by incremental CUDA memory peak (top 9 of 9):", r.out, r.text())
        self.assertEqual(len(r.reports), 2, "one report per worker; the controller allocates nothing")
        for path in r.reports:
            self.assertIn(f"report: {path}", r.out)

    def test_torch_cpu(self):
        """Real PyTorch on the CPU (no CUDA) under --memguard: every test passes, nothing is measured."""
        probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True)
        if probe.returncode != 0:
            skip(f"import torch fails: {probe.stderr.strip().splitlines()[-1:]}")
        r = self.run_pytest(["torch_cpu_cases.py"], self.memguard_args())
        self.assertEqual(r.rc, 0, r.text())
        self.assertEqual(len(r.outcomes), 4, r.text())
        self.assertEqual(set(r.outcomes.values()), {"passed"}, r.text())
        self.assertIn("Tests by incremental CUDA memory peak (top 4 of 4):", r.out)
        rows = re.findall(r"^ +0 B +0 B +\S+(?: B)? +memguard +torch_cpu_cases\.py::(\w+)$", r.out, re.M)
        self.assertEqual(sorted(rows), sorted(r.outcomes), r.text())
        # No CUDA allocation, but memguard's collection after the compile starts a report, and the
        # tests' phases are in it.
        self.assertEqual(len(r.reports), 1, r.text())
        self.assertIn(f"report: {r.reports[0]}", r.out)
        phases = json.loads(subprocess.run([cli(), "phases", os.path.join(r.dir, r.reports[0]), "--json"],
                                           capture_output=True, text=True, check=True).stdout)
        self.assertEqual(sorted(p["name"] for p in phases), sorted(f"torch_cpu_cases.py::{n}" for n in r.outcomes))


if __name__ == "__main__":
    unittest.main()
