#!/usr/bin/env python3
"""Installs the torch-memguard wheel into a fresh virtual environment and checks that it works where
nothing is built: no compiler, no CMake on PATH, no libunwind or spdlog needed (ldd), nothing from
the build tree on the library path, a working directory outside the repository.

    check_wheel.py --wheel dist/torch_memguard-*.whl --fake-cudart build/tests/fake_cuda/libcudart.so.13
                   [--example build/examples/alloc_demo] [--python PY] [--quick] [-k NAME]... [--hide-build-deps]
    check_wheel.py --source --lib build/lib/libmemguard.so --fake-cudart ...

--python: the interpreter whose venv gets the wheel (default: this one). --quick: only the checks
that depend on the interpreter (import, paths, no-ops, the preloaded phase round trip), for the
other CPython versions. --source: no wheel; the package straight from python/ (a source checkout):
the no-ops, the clear error of its missing native part, and, with --lib, its delegation to the
embedded module of a built library. -k: only the named checks. --hide-build-deps: where
`unshare -m` works (root), run in a private mount namespace with empty directories mounted over
what the build used (spdlog's, fmt's and nlohmann/json's headers, the CUDA toolkit,
.deps/libunwind), so that the installed wheel demonstrably runs without them; elsewhere ldd and
NEEDED are the evidence.

Each check is a function decorated with @check (full) or @check(quick=True); it gets the Env
and raises CheckFailed (or AssertionError) to fail. Add a check by adding a function. Exit status:
0 all passed, 1 a check failed, 2 bad usage. CTest runs this as wheel.* (tests/wheel/CMakeLists.txt).
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN_DIR = os.path.join(REPO, "tests", "report", "golden")
MiB = 1 << 20

# Programs on the hermetic PATH besides the venv's bin/: what the checks' commands need (memguard
# itself needs none). Everything else, compilers and CMake above all, is out of reach.
HERMETIC_TOOLS = ["sh", "env", "true", "cat", "sleep"]
# Must not be found on the hermetic PATH.
BUILD_TOOLS = ["gcc", "g++", "cc", "c++", "clang", "clang++", "ld", "cmake", "make", "ninja", "ccache"]
# What the bundled files may need: glibc's parts, libstdc++, libgcc_s.
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                  "ld-linux-x86-64.so.2", "libstdc++.so.6", "libgcc_s.so.1"}


class CheckFailed(Exception):
    pass


CHECKS = []


def check(fn=None, *, quick=False, source=False):
    """Registers a check. quick: also run with --quick (it depends on the interpreter). source: it
    is a check of the source checkout (--source), not of the wheel."""
    def register(f):
        CHECKS.append((f, quick, source))
        return f
    return register(fn) if fn else register


def expect(cond, what):
    if not cond:
        raise CheckFailed(what)


class Result:
    def __init__(self, args, p):
        self.args, self.rc, self.out, self.err = args, p.returncode, p.stdout, p.stderr

    def ok(self):
        """Raises unless the exit status is 0; returns self."""
        if self.rc != 0:
            raise CheckFailed(f"{' '.join(self.args)}: exit status {self.rc}\n{self.out}{self.err}")
        return self

    def json(self):
        return json.loads(self.out)


class Env:
    """A fresh venv with the package installed, and the hermetic environment its commands run in."""

    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.work = os.path.join(tmp, "work")  # the working directory of every command
        os.mkdir(self.work)
        self.tools = os.path.join(tmp, "tools")
        os.mkdir(self.tools)
        for name in HERMETIC_TOOLS:
            found = shutil.which(name)
            if not found:
                raise CheckFailed(f"{name} is not on PATH")
            os.symlink(found, os.path.join(self.tools, name))
        self.fake_cudart = os.path.abspath(args.fake_cudart) if args.fake_cudart else None
        self.bin = self.pythonpath = None
        if args.source:
            self.python = os.path.abspath(args.python)
            self.pythonpath = os.path.join(REPO, "python")
            self.lib = os.path.abspath(args.lib) if args.lib else None
            self.cli = [os.path.abspath(args.cli)] if args.cli else None
        else:
            self.venv = os.path.join(tmp, "venv")
            subprocess.run([args.python, "-m", "venv", self.venv], check=True, env=self.base_env(),
                           cwd=self.work)
            self.bin = os.path.join(self.venv, "bin")
            self.python = os.path.join(self.bin, "python")
            # --no-index: nothing is fetched; PIP_CONFIG_FILE=/dev/null: no configured index either.
            self.run([self.python, "-m", "pip", "install", "--no-index", "--disable-pip-version-check",
                      "-q", os.path.abspath(args.wheel)], env={"PIP_CONFIG_FILE": os.devnull}).ok()
            self.lib = self.py("import memguard; print(memguard.lib_path())").ok().out.strip()
            self.cli = [os.path.join(self.bin, "memguard")]
        # The package's __init__.py as `import memguard` finds it without the library.
        self.package_file = self.py("import memguard; print(memguard.__file__)").ok().out.strip()

    def base_env(self):
        """A new environment: only the venv's bin/ and the hermetic tools on PATH; no compiler,
        CMake, library path, MEMGUARD_* or Python variables inherited."""
        path = ([self.bin] if self.bin else []) + [self.tools]
        env = {"PATH": os.pathsep.join(path), "HOME": self.tmp, "TMPDIR": self.tmp, "LC_ALL": "C",
               "PYTHONDONTWRITEBYTECODE": "1"}
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        return env

    def run(self, argv, env=None, cwd=None, preload=False):
        """Runs argv in the hermetic environment (plus env), with libmemguard.so preloaded if asked."""
        e = self.base_env()
        if preload:
            expect(self.lib, "no library to preload (--lib)")
            e["LD_PRELOAD"] = self.lib
            e["MEMGUARD_OUTPUT"] = os.path.join(self.work, "report.%p.mgr")
        e.update(env or {})
        p = subprocess.run(argv, env=e, cwd=cwd or self.work, capture_output=True, text=True, timeout=300)
        return Result(argv, p)

    def py(self, code, *argv, **kw):
        return self.run([self.python, "-c", code, *argv], **kw)

    def memguard(self, *argv, **kw):
        """The installed `memguard` console script."""
        return self.run([os.path.join(self.bin, "memguard"), *argv], **kw)

    def reports(self):
        return sorted(glob.glob(os.path.join(self.work, "report.*.mgr")))


def wheel_version(path):
    return os.path.basename(path).split("-")[1]


def header_version():
    with open(os.path.join(REPO, "include", "memguard", "memguard.h")) as f:
        return re.search(r'#define MEMGUARD_VERSION_STRING "([^"]+)"', f.read()).group(1)


# --- the environment ---------------------------------------------------------------------------

@check
def hermetic_path(env):
    """The commands below run where no compiler or CMake can be found."""
    for tool in BUILD_TOOLS:
        r = env.run(["sh", "-c", f"command -v {tool}"])
        expect(r.rc != 0 and not r.out.strip(), f"{tool} is reachable: {r.out.strip()}")
        r = env.py(f"import shutil; print(shutil.which({tool!r}))").ok()
        expect(r.out.strip() == "None", f"{tool} is reachable from Python: {r.out.strip()}")


@check
def native_dependencies(env):
    """The bundled library and CLI need only glibc, libstdc++ and libgcc_s (NEEDED), all found in
    the system's directories (ldd), none from the build (.deps/libunwind, build trees)."""
    cli = env.py("import memguard; print(memguard.cli_path())").ok().out.strip()
    for f in (env.lib, cli):
        readelf = subprocess.run(["readelf", "-d", f], capture_output=True, text=True, check=True).stdout
        needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf))
        expect(needed and needed <= ALLOWED_NEEDED, f"{f} NEEDED {sorted(needed - ALLOWED_NEEDED)}")
        expect("RPATH" not in readelf and "RUNPATH" not in readelf, f"{f} has an RPATH/RUNPATH")
        ldd = subprocess.run(["ldd", f], capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
        expect(ldd.returncode == 0, f"ldd {f}: {ldd.stderr}")
        expect("not found" not in ldd.stdout, f"ldd {f}:\n{ldd.stdout}")
        for line in ldd.stdout.splitlines():
            m = re.search(r"=> (/\S+)", line)
            if m:
                expect(not m.group(1).startswith(REPO) and ".deps" not in m.group(1) and
                       "libunwind" not in m.group(1), f"ldd {f}: {line.strip()}")
        print(f"    ldd {os.path.relpath(f, env.tmp)}:\n" + textwrap.indent(ldd.stdout.rstrip(), "      "))


# Directories the build reads and the installed wheel must not need: hidden by --hide-build-deps.
BUILD_DEP_DIRS = ["/usr/include/spdlog", "/usr/include/fmt", "/usr/include/nlohmann", "/usr/local/include/spdlog",
                  "/usr/local/include/fmt", "/usr/local/cuda", os.path.join(REPO, ".deps"), os.environ.get("MEMGUARD_LIBUNWIND_PREFIX", "")]
HIDDEN_VAR = "MGTEST_WHEEL_HIDDEN"  # the directories hidden in this run, set by --hide-build-deps


@check
def build_deps_hidden(env):
    """With --hide-build-deps, the build's header and library directories are empty in this run."""
    hidden = [p for p in os.environ.get(HIDDEN_VAR, "").split(os.pathsep) if p]
    if not hidden:
        print("    note: build dependencies not hidden (no --hide-build-deps, or no `unshare -m` here)")
        return
    for p in hidden:
        expect(os.listdir(p) == [], f"{p} is not hidden")
    print(f"    hidden: {' '.join(hidden)}")


def hide_build_deps_and_rerun():
    """Re-runs this script in a private mount namespace with empty directories over BUILD_DEP_DIRS;
    returns None where `unshare -m` is not possible."""
    dirs = sorted({os.path.realpath(p) for p in BUILD_DEP_DIRS if p and os.path.isdir(p)})
    if not dirs or subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                                  capture_output=True).returncode != 0:
        return None
    empty = tempfile.mkdtemp(prefix="mgwheel-empty.")
    try:
        env = dict(os.environ, **{HIDDEN_VAR: os.pathsep.join(dirs)})
        mount = 'e=$1; shift; while [ "$1" != -- ]; do mount --bind "$e" "$1" || exit 1; shift; done; shift; exec "$@"'
        argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh", empty, *dirs, "--",
                sys.executable, os.path.abspath(__file__), *[a for a in sys.argv[1:] if a != "--hide-build-deps"]]
        return subprocess.run(argv, env=env).returncode
    finally:
        os.rmdir(empty)


# --- the command ---------------------------------------------------------------------------------

@check(quick=True)
def version(env):
    """`memguard --version` and `python -m memguard --version` run the bundled CLI; its version is
    the wheel's, memguard.__version__ and the header's MEMGUARD_VERSION_STRING."""
    v = header_version()
    script = env.memguard("--version").ok()
    expect(script.out.startswith(f"memguard {v} "), f"memguard --version: {script.out!r}, expected {v}")
    module = env.run([env.python, "-m", "memguard", "--version"]).ok()
    expect(module.out == script.out, f"python -m memguard --version: {module.out!r} vs {script.out!r}")
    expect(wheel_version(env.args.wheel) == v, f"wheel version {wheel_version(env.args.wheel)}, header {v}")
    got = env.py("import memguard; print(memguard.__version__)").ok().out.strip()
    expect(got == v, f"memguard.__version__ {got!r}, expected {v}")


@check
def golden_reports(env):
    """`memguard summary/top` and `python -m memguard ...` on checked-in reports print the golden
    output (tests/report/golden), as the CLI of the build does."""
    for name, argv in (("summary", ["summary", "basic.mgr"]), ("top", ["top", "basic.mgr"]),
                       ("alloc_phases", ["phases", "alloc_b.mgr"])):
        with open(os.path.join(GOLDEN_DIR, name + ".expected")) as f:
            expected = f.read()
        for r in (env.memguard(*argv, cwd=GOLDEN_DIR, env={"MEMGUARD_ADDR2LINE": ""}),
                  env.run([env.python, "-m", "memguard", *argv], cwd=GOLDEN_DIR, env={"MEMGUARD_ADDR2LINE": ""})):
            r.ok()
            expect(r.out == expected, f"{' '.join(r.args)} differs from golden/{name}.expected:\n{r.out}")


@check
def exit_status_and_arguments(env):
    """Arguments reach the CLI unchanged (spaces, empty ones) and its exit status and stderr come back."""
    cli = env.py("import memguard; print(memguard.cli_path())").ok().out.strip()
    for argv in (["no such command"], ["summary", ""], ["summary", os.path.join(env.work, "absent file.mgr")]):
        direct = env.run([cli, *argv])
        expect(direct.rc not in (0, None), f"{cli} {argv} succeeded")
        for r in (env.memguard(*argv), env.run([env.python, "-m", "memguard", *argv])):
            expect((r.rc, r.out, r.err) == (direct.rc, direct.out, direct.err),
                   f"{' '.join(r.args)}: ({r.rc}, {r.out!r}, {r.err!r}), the CLI itself: "
                   f"({direct.rc}, {direct.out!r}, {direct.err!r})")


@check
def entry_points(env):
    """Every entry point of the distribution resolves to a module of the installed package."""
    code = textwrap.dedent("""
        import importlib.metadata as md, importlib.util, json
        eps = [e for e in md.distribution("torch-memguard").entry_points]
        print(json.dumps({f"{e.group}:{e.name}": [e.value, importlib.util.find_spec(e.module) is not None]
                          for e in eps}))
    """)
    eps = env.py(code).ok().json()
    expect(eps.get("console_scripts:memguard") == ["memguard._cli:main", True], f"console script: {eps}")
    plugin = eps.get("pytest11:memguard")
    expect(plugin and plugin[0] == "memguard.pytest_plugin", f"pytest11 entry point: {eps}")
    if not os.path.exists(os.path.join(REPO, "python", "memguard", "pytest_plugin.py")):
        print("    note: python/memguard/pytest_plugin.py is not in this tree; its entry point is not resolved")
        return
    expect(plugin[1], "pytest11 entry point memguard.pytest_plugin: no such module in the wheel")


# --- the package -----------------------------------------------------------------------------------

NO_PRELOAD_CHILD = textwrap.dedent("""
    import json, os, sys
    import memguard
    out = {"file": memguard.__file__, "all": sorted(memguard.__all__), "embedded": "_memguard" in sys.modules,
           "active": memguard.active(), "report_path": memguard.report_path(), "flush": memguard.flush(),
           "mark": memguard.mark("m")}
    with memguard.phase("p") as ph:
        out["enter_returns"] = ph.name
    def f(x):
        return x + 1
    g = memguard.phase("d")(f)
    out["decorator_keeps_function"] = g is f and g(1) == 2
    out["repr"] = repr(memguard.phase("r"))
    out["cwd_files"] = os.listdir(".")
    print(json.dumps(out))
""")

PRELOAD_CHILD = textwrap.dedent("""
    import ctypes, json, sys
    import memguard
    out = {"file": memguard.__file__, "all": sorted(memguard.__all__), "active": memguard.active()}
    try:
        import _memguard
        out["delegates"] = all(getattr(memguard, n) is getattr(_memguard, n) for n in _memguard.__all__)
        out["embedded_all"] = sorted(_memguard.__all__)
    except ImportError:
        out["delegates"] = None
    if out["active"]:
        ctypes.CDLL(sys.argv[1])   # RTLD_LOCAL, as PyTorch loads the runtime
        g = ctypes.CDLL(None)      # libmemguard.so's cudaMalloc first
        g.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        p = ctypes.c_void_p()
        with memguard.phase("wheel phase"):
            assert g.cudaMalloc(ctypes.byref(p), 3 * (1 << 20)) == 0
        memguard.mark("wheel mark")
    out["report_path"] = memguard.report_path()
    out["flush"] = memguard.flush()
    print(json.dumps(out))
""")


def expect_no_ops(got, where):
    expect(got["active"] is False and got["report_path"] is None and got["flush"] is False and got["mark"] is None,
           f"{where}: active/report_path/flush/mark: {got}")
    expect(got["enter_returns"] == "p" and got["decorator_keeps_function"], f"{where}: phase: {got}")
    expect(got["repr"] == "memguard.phase('r')", f"{where}: {got['repr']}")
    expect(not got["embedded"], f"{where}: _memguard imported without the library")
    expect(got["cwd_files"] == [], f"{where}: files written: {got['cwd_files']}")


@check(quick=True)
def paths(env):
    """lib_path() and cli_path() are absolute paths of the installed files, inside the venv."""
    got = env.py("import json, memguard; print(json.dumps([memguard.__file__, memguard.lib_path(), "
                 "memguard.cli_path()]))").ok().json()
    pkg = os.path.dirname(got[0])
    expect(got[0].startswith(env.venv + os.sep), f"memguard imported from {got[0]}, not the venv")
    expect(got[1] == os.path.join(pkg, "_native", "lib", "libmemguard.so") and os.path.isfile(got[1]),
           f"lib_path() {got[1]}")
    expect(got[2] == os.path.join(pkg, "_native", "bin", "memguard") and os.access(got[2], os.X_OK),
           f"cli_path() {got[2]}")


@check(quick=True)
def no_preload(env):
    """Without the library `import memguard` works and every call is a no-op; active() is False."""
    got = env.py(NO_PRELOAD_CHILD).ok().json()
    expect(got["file"].startswith(env.venv + os.sep), f"memguard from {got['file']}")
    expect_no_ops(got, "no preload")


@check(quick=True)
def preload_phase_round_trip(env):
    """With LD_PRELOAD=memguard.lib_path() and the fake CUDA runtime: `import memguard` is the
    installed package, delegating to the embedded module (same objects); active() is True; a phase
    around a cudaMalloc is in the report (`memguard phases --json`) with its peak; the API's names
    are the same as without the preload."""
    expect(env.fake_cudart, "needs --fake-cudart")
    got = env.py(PRELOAD_CHILD, env.fake_cudart, preload=True).ok().json()
    plain = env.py(NO_PRELOAD_CHILD).ok().json()
    expect(got["file"] == env.package_file, f"memguard from {got['file']}, not the package {env.package_file}")
    expect(got["active"] is True, f"active() under the preload: {got}")
    expect(got["delegates"] is True, f"the package does not re-export the embedded module: {got}")
    expect(set(got["embedded_all"]) <= set(got["all"]), f"__all__ {got['all']} lacks some of {got['embedded_all']}")
    expect(got["all"] == plain["all"], f"__all__ under the preload {got['all']}, without {plain['all']}: "
           "each name of the embedded module needs a no-op in python/memguard/__init__.py")
    reports = env.reports()
    expect(len(reports) == 1 and got["report_path"] == reports[0], f"reports {reports}, report_path() {got}")
    expect(got["flush"] is True, f"flush(): {got}")
    expect(env.cli, "needs --cli")
    phases = env.run([*env.cli, "phases", reports[0], "--json"]).ok().json()
    mine = [p for p in phases if p["name"] == "wheel phase"]
    expect(len(mine) == 1 and mine[0]["ended"] and mine[0]["incremental_peak_bytes"] == 3 * MiB,
           f"phases: {phases}")
    os.remove(reports[0])


@check(quick=True)
def preload_disabled(env):
    """Preloaded with MEMGUARD_ENABLE=0 there is no embedded module: the package's no-ops answer."""
    got = env.py(NO_PRELOAD_CHILD, preload=True, env={"MEMGUARD_ENABLE": "0"}).ok().json()
    expect_no_ops(got, "MEMGUARD_ENABLE=0")


# --- memguard run, ranks, the pytest plugin, the gates (the installed commands) ----------------------

RUN_CHILD = textwrap.dedent("""
    import ctypes, json, os, signal, sys, time
    fake, action = sys.argv[1], sys.argv[2]
    if action == "ranks":  # a launcher, allocating nothing itself: two workers with RANK 0 and 1, as torchrun
        import subprocess
        procs = [subprocess.Popen([sys.executable, __file__, fake, "worker"], env=dict(os.environ, RANK=str(r)))
                 for r in range(2)]
        sys.exit(max(q.wait() for q in procs))
    ctypes.CDLL(fake)          # RTLD_LOCAL, as PyTorch loads the runtime
    g = ctypes.CDLL(None)      # libmemguard.so's cudaMalloc first
    g.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    p = ctypes.c_void_p()
    assert g.cudaMalloc(ctypes.byref(p), 1 << 20) == 0
    print(json.dumps({"LD_PRELOAD": os.environ.get("LD_PRELOAD"), "RANK": os.environ.get("RANK")}), flush=True)
    if action == "exit3":
        sys.exit(3)
    if action == "wait-for-sigterm":
        signal.signal(signal.SIGTERM, lambda *a: os._exit(42))
        open("ready", "w").close()
        time.sleep(60)
        sys.exit(5)
""")


def _run_child(env):
    path = os.path.join(env.tmp, "run_child.py")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(RUN_CHILD)
    return path


@check
def run_preloads_and_passes_the_status(env):
    """`memguard run` and `python -m memguard run`: the child runs with the installed library first
    in LD_PRELOAD (an existing LD_PRELOAD kept after it), writes its report, exits with its own
    status (3), and memguard lists the report and the command to read it."""
    expect(env.fake_cudart, "needs --fake-cudart")
    child = _run_child(env)
    for launcher in ([os.path.join(env.bin, "memguard")], [env.python, "-m", "memguard"]):
        out = os.path.join(env.work, "run.%p.mgr")
        r = env.run([*launcher, "run", "--output", out, "--", env.python, child, env.fake_cudart, "exit3"],
                    env={"LD_PRELOAD": env.fake_cudart})
        expect(r.rc == 3, f"{' '.join(r.args)}: exit status {r.rc}, expected the child's 3\n{r.out}{r.err}")
        seen = json.loads(r.out.splitlines()[0])
        expect(seen["LD_PRELOAD"] == f"{env.lib}:{env.fake_cudart}", f"LD_PRELOAD in the child: {seen}")
        written = sorted(glob.glob(os.path.join(env.work, "run.*.mgr")))
        expect(len(written) == 1, f"reports {written}")
        listed = os.path.relpath(written[0], env.work)
        expect(f"memguard: report: {listed}" in r.err and f"memguard top {listed}" in r.err,
               f"the report is not listed:\n{r.err}")
        env.memguard("summary", written[0]).ok()
        os.remove(written[0])


@check
def run_bundled_example(env):
    """The bundled example (examples/alloc_demo, linked against the fake runtime) under the installed
    `memguard run`: it exits 0, its report is listed, and `memguard top` names its own function as
    the largest site at the peak."""
    expect(env.args.example, "needs --example")
    out = os.path.join(env.work, "demo.%p.mgr")
    r = env.memguard("run", "--output", out, "--", os.path.abspath(env.args.example)).ok()
    written = glob.glob(os.path.join(env.work, "demo.*.mgr"))
    expect(len(written) == 1 and os.path.basename(written[0]) in r.err, f"reports {written}\n{r.err}")
    top = env.memguard("top", written[0], "-n", "1").ok()
    expect("forward_layer" in top.out, f"memguard top:\n{top.out}")
    os.remove(written[0])


@check
def run_forwards_sigterm(env):
    """SIGTERM sent to `memguard run` (the installed console script, which execs the CLI) reaches
    the child, whose handler's status (42) comes back."""
    expect(env.fake_cudart, "needs --fake-cudart")
    child = _run_child(env)
    work = tempfile.mkdtemp(dir=env.tmp)
    e = env.base_env()
    p = subprocess.Popen([os.path.join(env.bin, "memguard"), "run", "--output", os.path.join(work, "t.%p.mgr"), "--",
                          env.python, child, env.fake_cudart, "wait-for-sigterm"], env=e, cwd=work,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            if os.path.exists(os.path.join(work, "ready")) or p.poll() is not None:
                break
            time.sleep(0.05)
        if p.poll() is not None:
            raise CheckFailed(f"the child ended before the signal: {p.communicate()}")
        p.send_signal(15)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    expect(p.returncode == 42, f"exit status {p.returncode}, expected the child's handler's 42\n{err}")
    expect(len(glob.glob(os.path.join(work, "t.*.mgr"))) == 1, f"no report in {os.listdir(work)}")


@check
def run_ranks_and_merge(env):
    """`memguard run -- LAUNCHER` where the launcher starts two workers with RANK 0 and 1: one report
    per process with the rank in the default name, all of one run, and `memguard merge` with no
    arguments finds the ranks' reports."""
    expect(env.fake_cudart, "needs --fake-cudart")
    child = _run_child(env)
    work = tempfile.mkdtemp(dir=env.tmp)
    r = env.run([os.path.join(env.bin, "memguard"), "run", "--", env.python, child, env.fake_cudart, "ranks"], cwd=work)
    r.ok()
    names = sorted(os.listdir(work))
    ranked = [n for n in names if re.fullmatch(r"memguard\.python3[.0-9]*\.rank[01]\.\d+\.mgr", n)]
    expect(len(ranked) == 2, f"reports {names}")
    expect(f"memguard merge --run " in r.err, f"the next command is not merge:\n{r.err}")
    merged = env.run([os.path.join(env.bin, "memguard"), "merge", "--json"], cwd=work).ok().json()
    rows = sorted((row["rank"], row["file"]) for row in merged["ranks"])
    expect([rank for rank, _ in rows] == ["0", "1"] and sorted(f for _, f in rows) == sorted(ranked),
           f"merge --json: {merged}")
    expect(merged["run_id"] and merged["run_id"] in r.err, f"run id {merged['run_id']} vs\n{r.err}")


@check
def pytest_plugin(env):
    """`python -m pytest --memguard` in the venv (the plugin found by its pytest11 entry point, no
    -p): over the fake runtime, each marker's passing test passes and its failing test fails."""
    expect(env.fake_cudart, "needs --fake-cudart")
    try:
        import pytest  # the venv has no index to install from: pytest comes from this interpreter
    except ImportError:
        print("    note: pytest is not importable here; the plugin is not checked")
        return
    site = os.path.dirname(os.path.dirname(os.path.abspath(pytest.__file__)))
    cases = os.path.join(REPO, "tests", "pytest", "fake_cuda_cases.py")
    work = tempfile.mkdtemp(dir=env.tmp)
    shutil.copy(cases, work)
    xml = os.path.join(work, "junit.xml")
    r = env.run([env.python, "-m", "pytest", "--memguard", "-p", "no:cacheprovider", f"--junitxml={xml}",
                 "fake_cuda_cases.py"], cwd=work, env={"PYTHONPATH": site, "MGTEST_FAKE_CUDART": env.fake_cudart})
    expect(r.rc == 1 and os.path.exists(xml), f"pytest exit {r.rc}\n{r.out[-3000:]}{r.err[-2000:]}")
    import xml.etree.ElementTree as ET
    outcomes = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        outcomes[case.get("name")] = "failed" if failed else "passed"
    expect(len(outcomes) >= 6, f"outcomes {outcomes}")
    wrong = {n: o for n, o in outcomes.items() if o != ("failed" if n.endswith("_fails") else "passed")}
    expect(not wrong, f"unexpected outcomes {wrong}\n{r.out[-3000:]}")
    expect("Tests by incremental CUDA memory peak" in r.out, f"no summary:\n{r.out[-2000:]}")


@check
def gates(env):
    """`memguard check` and `memguard diff --fail-if` from the installed command: 0 within the limits,
    1 with a FAIL line past them, 2 for a bad size."""
    basic = os.path.join(GOLDEN_DIR, "basic.mgr")
    env.memguard("check", basic, "--max-peak", "1 TiB").ok()
    r = env.memguard("check", basic, "--max-peak", "1 TiB", "--no-oom")
    expect(r.rc == 1 and "FAIL OOM events 1" in r.out, f"check --no-oom (the report has one): {r.rc}\n{r.out}")
    r = env.memguard("check", basic, "--max-peak", "1KiB")
    expect(r.rc == 1 and "FAIL peak" in r.out, f"check over the limit: {r.rc}\n{r.out}{r.err}")
    r = env.memguard("check", basic, "--max-peak", "2G")
    expect(r.rc == 2 and len(r.err.strip().splitlines()) <= 2, f"a bad size: {r.rc}\n{r.err}")
    r = env.memguard("diff", basic, basic, "--fail-if", "peak>+5%")
    expect(r.rc == 0, f"diff of a run with itself: {r.rc}\n{r.err}")
    r = env.memguard("diff", basic, basic, "--fail-if", "peak>=+0")
    expect(r.rc == 1 and "FAIL" in r.out, f"diff --fail-if peak>=+0: {r.rc}\n{r.out}")


# --- the source checkout (--source) ---------------------------------------------------------------

@check(source=True)
def source_no_native(env):
    """From a source checkout (python/ on PYTHONPATH, nothing installed): the no-ops work, and
    lib_path(), the `memguard` entry point and `python -m memguard` say the native part is missing."""
    got = env.py(NO_PRELOAD_CHILD).ok().json()
    expect(got["file"] == os.path.join(REPO, "python", "memguard", "__init__.py") == env.package_file,
           f"memguard from {got['file']}")
    expect_no_ops(got, "source checkout")
    r = env.py("import memguard; memguard.lib_path()")
    expect(r.rc == 1 and "FileNotFoundError" in r.err and "no native part" in r.err, f"lib_path(): {r.err}")
    v = env.py("import memguard; print(memguard.__version__)").ok().out.strip()
    expect(v == header_version(), f"__version__ {v!r} in a source checkout")
    for r in (env.run([env.python, "-m", "memguard", "--version"]),
              env.py("import sys, memguard._cli; sys.exit(memguard._cli.main(['--version']))")):
        lines = r.err.splitlines()
        expect(r.rc == 2 and r.out == "" and len(lines) == 1 and "is missing" in lines[0],
               f"{' '.join(r.args)}: exit {r.rc}, stdout {r.out!r}, stderr {r.err!r}")


@check(source=True)
def source_delegates(env):
    """The package from the source checkout, under a built library, delegates to its embedded
    module (a regular package named memguard wins over the embedded one; that stays _memguard)."""
    expect(env.lib and env.cli, "needs --lib and --cli")
    preload_phase_round_trip(env)
    preload_disabled(env)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheel")
    ap.add_argument("--source", action="store_true")
    ap.add_argument("--lib", help="--source: a built libmemguard.so")
    ap.add_argument("--cli", help="--source: the built memguard CLI")
    ap.add_argument("--fake-cudart")
    ap.add_argument("--example", help="examples/alloc_demo of the build (run under the installed `memguard run`)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-k", action="append", default=[], help="run only this check (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--hide-build-deps", action="store_true",
                    help="hide the build's dependencies (a private mount namespace; needs root)")
    args = ap.parse_args()
    if args.source == bool(args.wheel):
        ap.error("give --wheel WHEEL or --source")
    if args.wheel and not os.path.isfile(args.wheel):
        ap.error(f"no wheel {args.wheel}")
    selected = [(f, q, s) for f, q, s in CHECKS
                if s == args.source and (not args.quick or q) and (not args.k or f.__name__ in args.k)]
    if not selected:
        ap.error("no check selected")
    if args.hide_build_deps and HIDDEN_VAR not in os.environ:
        rc = hide_build_deps_and_rerun()
        if rc is not None:
            return rc

    tmp = tempfile.mkdtemp(prefix="mgwheel.")
    failed = []
    try:
        try:
            env = Env(args, tmp)
        except (CheckFailed, subprocess.CalledProcessError) as e:
            print(f"FAIL setting up the venv: {e}")
            return 1
        where = args.wheel and os.path.basename(args.wheel) or "python/ (source checkout)"
        pyver = env.py("import sys; print(sys.version.split()[0])").ok().out.strip()
        print(f"check_wheel: {where} with Python {pyver} ({args.python})")
        for f, _, _ in selected:
            try:
                f(env)
                print(f"  ok    {f.__name__}")
            except (CheckFailed, AssertionError, subprocess.SubprocessError, OSError, ValueError) as e:
                failed.append(f.__name__)
                print(f"  FAIL  {f.__name__}: {(f.__doc__ or '').strip().splitlines()[0]}\n"
                      + textwrap.indent(str(e) or traceback.format_exc(), "        "))
    finally:
        if args.keep:
            print(f"check_wheel: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"check_wheel: {len(selected) - len(failed)} of {len(selected)} passed" +
          (f"; failed: {' '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
