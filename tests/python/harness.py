"""Driver side of the Python tests: runs a test's child in a fresh interpreter under
LD_PRELOAD=libmemguard.so with a controlled environment, and reads its report.

Environment of the driver (set by CTest, see CMakeLists.txt):
  MGTEST_LIB          libmemguard.so (required)
  MGTEST_FAKE_CUDART  the fake CUDA runtime, libcudart.so.13 (tests 3 and 10)
  MGTEST_KEEP=1       keep the children's working directories (printed) for inspection
  MGTEST_SABOTAGE     deliberately break every child, to see the tests fail:
                        collect_off  MEMGUARD_COLLECT_COMPILE_GARBAGE=0 in every child
                        collect_on   MEMGUARD_COLLECT_COMPILE_GARBAGE=1 in every child
                        no_preload   children run without libmemguard.so
A test is skipped (exit code 77) only when `import torch` fails in the test's interpreter.
"""
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP_RC = 77


def require_torch():
    """Exits with 77 (CTest: skipped) when torch cannot be imported."""
    r = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True,
                       env=_base_env())
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        print(f"SKIP: `import torch` fails in {sys.executable}: {last}")
        sys.exit(SKIP_RC)


def lib_path():
    p = os.environ.get("MGTEST_LIB")
    if not p or not os.path.isfile(p):
        raise RuntimeError("MGTEST_LIB must name libmemguard.so")
    return os.path.abspath(p)


def fake_cudart_path():
    p = os.environ.get("MGTEST_FAKE_CUDART")
    if not p or not os.path.isfile(p):
        raise RuntimeError("MGTEST_FAKE_CUDART must name the fake libcudart.so.13")
    return os.path.abspath(p)


_DROP_PREFIXES = ("MEMGUARD_", "TORCH_", "TORCHDYNAMO", "TORCHINDUCTOR", "PYTORCH_", "MGTEST_")
_DROP = {"LD_PRELOAD", "PYTHONSTARTUP", "PYTHONPROFILEIMPORTTIME", "PYTHONTRACEMALLOC",
         "PYTHONDEVMODE", "PYTHONINSPECT", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS"}


def _base_env():
    env = {k: v for k, v in os.environ.items() if k not in _DROP and not k.startswith(_DROP_PREFIXES)}
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["OMP_NUM_THREADS"] = "1"     # bitwise-reproducible CPU results
    env["CUDA_VISIBLE_DEVICES"] = ""  # the real CUDA is never used by these tests
    return env


# --- report reading -----------------------------------------------------------------------------

def _dec(s):
    return "" if s == "%" else urllib.parse.unquote(s)


def open_report(path, lib=None):
    """A report's lines, to read as a text file: a binary report (the library's default) through
    `memguard export --text` (the one beside `lib`, by default MGTEST_LIB's)."""
    with open(path, "rb") as f:
        binary = f.read(23) == b"MEMGUARD-REPORT-BINARY "
    if not binary:
        return open(path)
    cli = os.path.join(os.path.dirname(os.path.dirname(lib or lib_path())), "bin", "memguard")
    p = subprocess.run([cli, "export", "--text", path, "-o", "-"], capture_output=True, text=True, check=True)
    return io.StringIO(p.stdout)


class Report:
    """The records of one report, by type. Y: dicts; X: (t, tid, compile_id); A: dicts; p, P: maps."""

    def __init__(self, path):
        self.path = path
        self.info, self.X, self.Y, self.A, self.C, self.c = {}, [], [], [], [], []
        self.j, self.u, self.y, self.r = [], [], [], []  # explanations (minor 9)
        self.pframes, self.pstacks = {}, {}
        self.ended = False
        with open(path, "rb") as f:
            self.encoding = "binary" if f.read(23) == b"MEMGUARD-REPORT-BINARY " else "text"
        with open_report(path) as f:
            self.header = f.readline().rstrip("\n")
            for line in f:
                w = line.rstrip("\n").split(" ")
                t = w[0]
                if t == "I":
                    self.info[w[1]] = _dec(w[2]) if len(w) > 2 else ""
                elif t == "X":
                    self.X.append((int(w[1]), int(w[2]), _dec(w[3])))
                elif t == "Y":
                    self.Y.append({"t": int(w[1]), "tid": int(w[2]), "trigger": w[3], "generation": int(w[4]),
                                   "duration_ns": int(w[5]), "collected": int(w[6]),
                                   "uncollectable": int(w[7]),
                                   "cuda_bytes_freed": None if w[8] == "-" else int(w[8]),
                                   "compile_ids": [] if w[9] == "-" else _dec(w[9]).split(","),
                                   "mark_age_ns": None if w[10] == "-" else int(w[10]),
                                   "skipped": None if len(w) <= 11 or w[11] == "-" else int(w[11]),
                                   "explain": None if len(w) <= 12 or w[12] == "-" else int(w[12])})
                elif t == "j":
                    self.j.append({"t": int(w[1]), "tid": int(w[2]), "explain": int(w[3]), "objects": int(w[4]),
                                   "tensors": int(w[5]), "cuda_bytes": int(w[6]), "analysis_ns": int(w[7]),
                                   "complete": w[8] == "1"})
                elif t == "u":
                    self.u.append({"explain": int(w[1]), "kind": w[2], "count": int(w[3]), "cuda_bytes": int(w[4]),
                                   "name": _dec(w[5])})
                elif t == "y":
                    self.y.append({"explain": int(w[1]), "device": int(w[2]), "addr": int(w[3], 16),
                                   "size": int(w[4]), "how": w[5], "category": w[6],
                                   "holder": None if w[7] == "-" else _dec(w[7])})
                elif t == "r":
                    self.r.append({"explain": int(w[1]), "addr": int(w[2], 16), "step": int(w[3]),
                                   "object": _dec(w[4]), "edge": None if w[5] == "-" else _dec(w[5])})
                elif t == "A":
                    self.A.append({"t": int(w[1]), "tid": int(w[2]), "addr": w[3], "size": int(w[4]),
                                   "kind": w[5], "api": w[6], "stack_id": int(w[9]),
                                   "capture_id": int(w[10]) if len(w) > 10 else 0,
                                   "python_stack_id": int(w[11]) if len(w) > 11 else 0})
                elif t == "p":
                    self.pframes[int(w[1])] = {"line": int(w[2]), "function": _dec(w[3]), "filename": _dec(w[4])}
                elif t == "P":
                    self.pstacks[int(w[1])] = [int(x) for x in w[2:]]
                elif t == "C":
                    self.C.append({"t": int(w[1]), "tid": int(w[2]), "capture_id": int(w[3])})
                elif t == "c":
                    self.c.append({"t": int(w[1]), "tid": int(w[2]), "capture_id": int(w[3]), "error": int(w[4])})
                elif t == "Z":
                    self.ended = True

    def memguard_Y(self):
        return [y for y in self.Y if y["trigger"] == "memguard"]

    def python_stack(self, stack_id):
        """[(function, filename, line)], innermost first."""
        return [(self.pframes[i]["function"], self.pframes[i]["filename"], self.pframes[i]["line"])
                for i in self.pstacks[stack_id]]


# --- running a child ----------------------------------------------------------------------------

class Run:
    def __init__(self, argv, rc, stdout, stderr, pid, workdir, result, reports):
        self.argv, self.rc, self.stdout, self.stderr, self.pid = argv, rc, stdout, stderr, pid
        self.workdir, self.result, self.reports = workdir, result, reports

    @property
    def report(self):
        """The child's own report (the file named after its pid), or None."""
        mine = [r for r in self.reports if f".{self.pid}.mgr" in os.path.basename(r)]
        return Report(mine[0]) if mine else None

    def need_report(self):
        """The child's own report; an AssertionError (with the child's output) when there is none."""
        rep = self.report
        if rep is None:
            raise AssertionError("the child wrote no report\n" + self.describe())
        return rep

    def describe(self):
        return (f"child {self.argv} rc={self.rc} pid={self.pid} workdir={self.workdir}\n"
                f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-8000:]}")

    def align(self, probe_events):
        """Matches the child's GcProbe events to the report's Y records: returns the Y record of
        each event, in order (the run of Y records that equals the events, which must be unique)."""
        ys = self.need_report().Y
        n = len(probe_events)

        def key(d):
            return (d["tid"], d["generation"], d["collected"], d["uncollectable"])

        want = [key(e) for e in probe_events]
        starts = [k for k in range(len(ys) - n + 1) if [key(y) for y in ys[k:k + n]] == want]
        if len(starts) != 1:
            raise AssertionError(f"gc probe events match the report's Y records at {len(starts)} places, "
                                 f"not exactly one\n" + self.describe())
        return ys[starts[0]:starts[0] + n]


def run_child(script, arm=None, *, env=None, preload=True, output=True, timeout=300, args=()):
    """Runs `python script --child RESULT.json ARM_JSON` in a fresh working directory.

    preload: LD_PRELOAD=libmemguard.so. output: MEMGUARD_OUTPUT=<workdir>/report.%p.mgr (else the
    library's default name, in the working directory). env: added variables (None removes one)."""
    workdir = tempfile.mkdtemp(prefix="mgtest.")
    result_path = os.path.join(workdir, "result.json")
    e = _base_env()
    e["PYTHONPATH"] = HERE + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(workdir, "inductor-cache")
    e["MEMGUARD_LOG_LEVEL"] = "debug"
    if preload:
        e["LD_PRELOAD"] = lib_path()
    if output:
        e["MEMGUARD_OUTPUT"] = os.path.join(workdir, "report.%p.mgr")
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    sabotage = os.environ.get("MGTEST_SABOTAGE", "")
    if sabotage == "collect_off":
        e["MEMGUARD_COLLECT_COMPILE_GARBAGE"] = "0"
    elif sabotage == "collect_on":
        e["MEMGUARD_COLLECT_COMPILE_GARBAGE"] = "1"
    elif sabotage == "no_preload":
        e.pop("LD_PRELOAD", None)
    elif sabotage:
        raise RuntimeError(f"unknown MGTEST_SABOTAGE={sabotage}")
    argv = [sys.executable, os.path.abspath(script), "--child", result_path, json.dumps(arm or {})]
    argv += list(args)
    p = subprocess.Popen(argv, cwd=workdir, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        err += f"\n[harness: killed after {timeout} s]"
    result = None
    if os.path.exists(result_path):
        with open(result_path) as f:
            result = json.load(f)
    reports = sorted(os.path.join(workdir, n) for n in os.listdir(workdir) if n.endswith(".mgr") or ".mgr." in n)
    run = Run(argv, p.returncode, out, err, p.pid, workdir, result, reports)
    if os.environ.get("MGTEST_KEEP") == "1":
        print(f"[harness] kept {workdir}", file=sys.stderr)
    else:
        _cleanup.append(workdir)
    return run


_cleanup = []


def cleanup():
    for d in _cleanup:
        shutil.rmtree(d, ignore_errors=True)


def child_main(child_fn):
    """In the child: `script --child RESULT.json ARM_JSON` calls child_fn(arm) and writes its result."""
    result_path, arm = sys.argv[2], json.loads(sys.argv[3])
    result = child_fn(arm)
    with open(result_path, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)


def main(child_fn=None):
    """Entry point of every test file: the child when --child, else the unittest driver."""
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(child_fn)
        return
    require_torch()
    try:
        unittest.main(verbosity=2)
    finally:
        cleanup()


class ChildTestCase(unittest.TestCase):
    maxDiff = None

    def assertChildOk(self, run):
        self.assertEqual(run.rc, 0, "the child failed\n" + run.describe())
        self.assertIsNotNone(run.result, "the child wrote no result\n" + run.describe())
