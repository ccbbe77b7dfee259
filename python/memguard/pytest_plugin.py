"""memguard's pytest plugin: CUDA memory gates for tests. Off unless `pytest --memguard`.

    pytest --memguard tests/

With --memguard the session runs under libmemguard.so (the plugin re-runs pytest with the library
preloaded when it is not), every test's call is a phase of the report (named by its node id), and
three markers gate the CUDA memory a test uses:

    @pytest.mark.limit_gpu_memory("2 GiB")   # incremental peak: peak during the test - live at its start
    @pytest.mark.limit_gpu_leaks("64 MiB")   # live after the test (after gc.collect()) - live at its start
    @pytest.mark.no_tensor_cycles            # no garbage collection freed CUDA memory during the test

A test that breaks a limit fails with the figures and the allocation sites that hold the memory
(read from the report, only then). The session ends with the tests of the largest incremental peak
and the report's path. Without --memguard the markers do nothing. docs/pytest.md has the details:
what the bytes are in each mode, and how the figures relate to `memguard phases`.
"""
import ctypes
import gc
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

# Set to this process's pid by the re-exec, so that a preload that did not take (the loader
# ignores a library it cannot load) is said once instead of exec'ing again. A pid, not a flag:
# a pytest started by a test, which inherits the environment, is another process and may re-exec.
_REEXEC_ENV = "_MEMGUARD_PYTEST_REEXEC"

_MARKERS = {
    "limit_gpu_memory": "limit_gpu_memory(limit): with --memguard, fail the test when its incremental "
                        "CUDA memory peak (peak during the test minus live at its start) exceeds limit "
                        "(bytes, or a string such as '2 GiB')",
    "limit_gpu_leaks": "limit_gpu_leaks(limit): with --memguard, fail the test when it leaves more than "
                       "limit more CUDA memory live than at its start (measured after gc.collect())",
    "no_tensor_cycles": "no_tensor_cycles: with --memguard, fail the test when a garbage collection during "
                        "it (or the full collection run at its end) freed CUDA memory: memory held by "
                        "reference cycles",
}

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
# The grammar of the CLI's sizes (src/report/units.cpp, `memguard check`): digits, an optional
# fraction of up to 18 digits, an optional unit in any case, spaces or tabs around; rounded down.
_SIZE = re.compile(r"[ \t]*([0-9]+(?:\.[0-9]{1,18})?)[ \t]*([A-Za-z]*)[ \t]*\Z")


def parse_size(value):
    """Bytes from an int or a string such as '2 GiB', '64MiB', '1.5 GB', '4096' (KB, MB, GB, TB are
    powers of 1000; KiB, MiB, GiB, TiB of 1024; as `memguard check` reads sizes). Raises ValueError
    naming the value otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64:
        return value
    if isinstance(value, str):
        m = _SIZE.match(value)
        if m and m.group(2).lower() in _UNITS:
            from fractions import Fraction
            n = int(Fraction(m.group(1)) * _UNITS[m.group(2).lower()])
            if n < 2**64:
                return n
    raise ValueError(f"bad size {value!r}: expected a number of bytes or a number with a unit "
                     f"(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. '2 GiB'")


def human_bytes(n):
    """'6.00 MiB', as the memguard command prints sizes."""
    sign, n = ("-", -n) if n < 0 else ("", n)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{sign}{n / scale:.2f} {unit}"
    return f"{sign}{n} B"


# --- the library: is it loaded, where is it, re-running pytest under it --------------------------

def _loaded_library():
    """The path of the libmemguard.so loaded in this process, or None."""
    try:
        fn = ctypes.CDLL(None).memguard_version
    except (AttributeError, OSError):
        return None
    addr = ctypes.cast(fn, ctypes.c_void_p).value
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split(None, 5)
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if lo <= addr < hi and len(parts) == 6:
                    return parts[5].strip()
    except OSError:
        pass
    return "libmemguard.so"


def _library_to_preload(config):
    """--memguard-library, else the installed package's memguard.lib_path(); None when neither."""
    given = config.getoption("memguard_library")
    if given:
        return os.path.abspath(given)
    try:
        import memguard
        lib_path = getattr(memguard, "lib_path", None)
        return lib_path() if lib_path else None
    except Exception:
        return None


def _reexec_under_preload(config):
    """Replaces this process by the same command with libmemguard.so prepended to LD_PRELOAD.
    Returns only when that cannot be done (raises pytest.UsageError saying why)."""
    if os.environ.get(_REEXEC_ENV) == str(os.getpid()):
        raise pytest.UsageError(
            "memguard: pytest was re-run with LD_PRELOAD=" + os.environ.get("LD_PRELOAD", "") +
            " but libmemguard.so is not loaded (see the loader's message above)")
    lib = _library_to_preload(config)
    if not lib or not os.path.isfile(lib):
        raise pytest.UsageError(
            "memguard: --memguard needs libmemguard.so: " +
            (f"{lib} does not exist" if lib else "install the torch-memguard wheel") +
            ", pass --memguard-library PATH, or run under it (memguard run -- pytest ...)")
    if tuple(config.invocation_params.args) != tuple(sys.argv[1:]):
        raise pytest.UsageError(
            "memguard: pytest.main() was called with its own arguments, so this process cannot be re-run "
            "under libmemguard.so; run the program under it (memguard run -- python ...)")
    env = dict(os.environ)
    env["LD_PRELOAD"] = lib + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    env[_REEXEC_ENV] = str(os.getpid())
    # The interpreter's own options (-X, -W, ...) and how pytest was started (-m pytest, the
    # pytest script) are kept: sys.orig_argv is the command line as the process got it.
    argv = list(getattr(sys, "orig_argv", []))[1:] or ["-m", "pytest"] + sys.argv[1:]
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        capman.stop_global_capturing()  # file descriptors 1 and 2 back to the terminal
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable] + argv, env)


# --- hooks of the plugin module (always registered) -----------------------------------------------

def pytest_addoption(parser):
    group = parser.getgroup("memguard", "CUDA memory gates (memguard)")
    group.addoption("--memguard", action="store_true", default=False,
                    help="run the session under memguard (libmemguard.so): each test is a phase of the "
                         "report, the limit_gpu_memory, limit_gpu_leaks and no_tensor_cycles markers are "
                         "checked, and the summary lists the tests by incremental CUDA memory peak")
    group.addoption("--memguard-library", metavar="PATH", default=None,
                    help="the libmemguard.so to preload (default: the installed package's, memguard.lib_path())")
    group.addoption("--memguard-top", metavar="N", type=int, default=10,
                    help="tests listed in the memguard summary (default 10)")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    if config.getoption("memguard") and _loaded_library() is None:
        _reexec_under_preload(config)
    return None


def pytest_configure(config):
    for name, text in _MARKERS.items():
        config.addinivalue_line("markers", text)
    if config.getoption("memguard"):
        config.pluginmanager.register(MemguardSession(config), "memguard-session")


# --- measuring --------------------------------------------------------------------------------------

def _torch_cuda():
    """torch.cuda when this process uses PyTorch's CUDA (imported and initialized), else None.
    Never imports torch nor initializes CUDA."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    try:
        return cuda if cuda is not None and cuda.is_initialized() else None
    except Exception:
        return None


def _torch_devices(cuda):
    return range(cuda.device_count())


class Limits:
    """The memguard markers of one test, their values parsed."""

    def __init__(self, item):
        self.memory = self._limit(item, "limit_gpu_memory")
        self.leaks = self._limit(item, "limit_gpu_leaks")
        self.cycles = item.get_closest_marker("no_tensor_cycles") is not None

    @staticmethod
    def _limit(item, name):
        mark = item.get_closest_marker(name)
        if mark is None:
            return None
        args = list(mark.args) + ([mark.kwargs["limit"]] if "limit" in mark.kwargs else [])
        if len(args) != 1 or set(mark.kwargs) - {"limit"}:
            raise pytest.UsageError(f"memguard: @pytest.mark.{name} takes one limit, e.g. {name}('2 GiB') "
                                    f"(test {item.nodeid})")
        try:
            return parse_size(args[0])
        except ValueError as e:
            raise pytest.UsageError(f"memguard: @pytest.mark.{name} of {item.nodeid}: {e}") from None

    @property
    def collect(self):
        return self.leaks is not None or self.cycles

    @property
    def any(self):
        return self.memory is not None or self.collect


class Measure:
    """One test's figures. `bytes_of` says what the bytes are: "torch" (PyTorch's allocated-bytes
    counters, torch.cuda.memory_allocated(), summed over devices) when the test ended with PyTorch's
    CUDA initialized, else "memguard" (memguard.stats(): in allocator mode the tensor blocks, else
    the GPU memory memguard's hooks saw)."""

    def __init__(self, mg):
        self.mg = mg
        cuda = _torch_cuda()
        self.torch_live0 = None
        if cuda is not None:
            for d in _torch_devices(cuda):
                cuda.reset_peak_memory_stats(d)
            self.torch_live0 = sum(cuda.memory_allocated(d) for d in _torch_devices(cuda))
        mg.reset_peak()
        self.mg0 = mg.stats()
        self.bytes_of = "memguard"
        self.live0 = self.peak = self.live1 = 0
        self.leaked = None
        self.gc_freed = 0

    def _live(self, cuda):
        if cuda is not None:
            return sum(cuda.memory_allocated(d) for d in _torch_devices(cuda))
        return self.mg.stats().live_bytes

    def end(self, collect):
        """At the end of the call: the peak; then (when `collect`) a full collection, the bytes still
        live and what collections freed."""
        cuda = _torch_cuda()
        mg1 = self.mg.stats()
        if cuda is not None:
            self.bytes_of = "torch"
            # Not initialized at the start: nothing of PyTorch's was live, and its peak is the test's.
            self.live0 = self.torch_live0 or 0
            self.peak = sum(cuda.max_memory_allocated(d) for d in _torch_devices(cuda))
        else:
            self.live0 = self.mg0.live_bytes
            self.peak = mg1.peak_bytes
        self.peak = max(self.peak, self.live0)
        if collect:
            gc.collect()
            self.live1 = self._live(cuda)
            self.leaked = self.live1 - self.live0
        else:
            self.live1 = self._live(cuda)
        self.gc_freed = self.mg.stats().gc_cuda_bytes_freed - self.mg0.gc_cuda_bytes_freed

    @property
    def incremental_peak(self):
        return self.peak - self.live0

    def bytes_text(self):
        if self.bytes_of == "torch":
            return "PyTorch's allocated bytes (torch.cuda.memory_allocated())"
        if self.mg0.allocator_mode:
            return "tensor blocks of memguard's allocator (torch.cuda.memory_allocated())"
        return "GPU memory memguard saw allocated (cudaMalloc and friends)"


# --- the allocation sites, from the report (only when a test fails) ---------------------------------

class Sites:
    """Asks the memguard command about the report: the allocation sites behind a failure."""

    def __init__(self, library):
        self.cli = None
        if library:
            # COMMON layout: bin/memguard next to lib/libmemguard.so, in the build tree and the wheel.
            near = os.path.join(os.path.dirname(os.path.dirname(library)), "bin", "memguard")
            self.cli = near if os.access(near, os.X_OK) else shutil.which("memguard")

    def _run(self, *args):
        if not self.cli:
            raise RuntimeError("the memguard command was not found next to libmemguard.so nor on PATH")
        r = subprocess.run([self.cli, *args], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"memguard {args[0]}: {r.stderr.strip() or r.returncode}")
        return json.loads(r.stdout)

    def phase(self, report, phase_id):
        for p in self._run("phases", report, "--json"):
            if p["id"] == phase_id:
                return p
        raise RuntimeError(f"phase {phase_id} is not in {report}")

    def top(self, report, at, since=None, n=5):
        args = ["top", report, "--at", _seconds(at), "--json", "-n", str(n), "--frames", "4"]
        if since is not None:
            args += ["--since", _seconds(since)]
        return self._run(*args)

    def collections(self, report, since):
        return [c for c in self._run("cycles", report, "--all", "--json")["collections"]
                if c["time_s"] >= since and (c["cuda_bytes_freed"] or 0) > 0]


def _seconds(t):
    """A report time for the command line: 'exit', or seconds with the report's nanosecond digits."""
    return t if isinstance(t, str) else f"{t:.9f}"


def _frames_text(site):
    """The site's innermost Python frames (else native ones), innermost first."""
    frames = site.get("frames", [])
    py = [f for f in frames if f["kind"] == "python"]
    shown = []
    for f in py or frames:
        if f["kind"] == "python":
            shown.append(f"{f['function']} at {f['file']}:{f['line']}")
        else:
            shown.append(f.get("function") or f"{os.path.basename(f.get('module') or '?')}+{f.get('offset')}")
        if len(shown) == 3:
            break
    return " <- ".join(shown) or "(no stack)"


def _sites_lines(sites, what, torch_segments=False):
    if not sites:
        if torch_segments:
            return [f"  {what}: none in the report (with PyTorch's allocator memguard sees its segments, "
                    "and this memory stayed in its cache; MEMGUARD_ALLOCATOR=memguard records every tensor)"]
        return [f"  {what}: none in the report"]
    lines = [f"  {what}:"]
    for i, s in enumerate(sites, 1):
        count = f"{s['blocks']} block{'s' if s['blocks'] != 1 else ''}"
        lines.append(f"    #{i} {human_bytes(s['bytes']):>10}  {count:<10} {_frames_text(s)}")
    return lines


class MemguardSession:
    """The plugin's per-session state with --memguard: one per process (each xdist worker has its own;
    the controller only gathers the workers' figures for the summary)."""

    def __init__(self, config):
        self.config = config
        self.library = _loaded_library()
        self.mg = None
        self.problem = None
        if self.library is None:
            self.problem = "libmemguard.so is not loaded"
        else:
            try:
                import _memguard  # the library's embedded module (absent with MEMGUARD_ENABLE=0)
                self.mg = _memguard if _memguard.active() else None
            except ImportError:
                pass
            if self.mg is None:
                self.problem = "memguard does not record in this process (MEMGUARD_ENABLE=0?)"
        self.sites = Sites(self.library)
        self.results = []   # dicts, from this process's tests or the xdist workers'
        self.reports = set()

    # -- header and summary
    def pytest_report_header(self, config):
        if not self.problem:  # a problem is said once, in the summary, where it is seen
            return f"memguard: {self.library}; each test is a phase of the report"
        return None

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        if hasattr(self.config, "workerinput"):
            return
        tr.section("memguard")
        if self.problem and not self.results:
            tr.write_line(f"memguard: {self.problem}: the memory markers were not checked")
            return
        top_n = self.config.getoption("memguard_top")
        rows = sorted(self.results, key=lambda r: (-r["incremental_peak"], r["nodeid"]))[:top_n]
        if rows:
            tr.write_line(f"Tests by incremental CUDA memory peak (top {len(rows)} of {len(self.results)}):")
            tr.write_line(f"{'incr. peak':>12} {'peak':>12} {'leaked':>12}  {'bytes of':<8}  test")
            for r in rows:
                leaked = human_bytes(r["leaked"]) if r["leaked"] is not None else "-"
                tr.write_line(f"{human_bytes(r['incremental_peak']):>12} {human_bytes(r['peak']):>12} "
                              f"{leaked:>12}  {r['bytes_of']:<8}  {r['nodeid']}")
        reports = sorted(self.reports | ({self.mg.report_path()} - {None} if self.mg else set()))
        if reports:
            for path in reports:
                tr.write_line(f"report: {path}  (memguard phases {path})")
        else:
            tr.write_line("no report: no test allocated CUDA memory")

    # -- gathering (also from xdist workers: user_properties travel with the reports)
    def pytest_runtest_logreport(self, report):
        if report.when != "call":
            return
        for key, value in report.user_properties:
            if key == "memguard":
                self.results.append(value)
                if value.get("report"):
                    self.reports.add(value["report"])

    # -- measuring one test
    def pytest_collection_modifyitems(self, items):
        for item in items:  # a bad marker stops the session before any test runs, with its message
            item._memguard_limits = Limits(item)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        if self.mg is None:
            yield
            return
        limits = getattr(item, "_memguard_limits", None) or Limits(item)
        if limits.collect:
            gc.collect()  # earlier garbage is not this test's
        cuda = _torch_cuda()
        if limits.any and cuda is not None and not self.mg.stats().allocator_mode:
            # With PyTorch's own allocator memguard sees its segments, and a test served from the
            # cache that earlier tests left has no allocation of its own in the report: emptied, the
            # segments this test needs are allocated during it, so a failure can name their sites.
            # Only for tests with a marker (the figures themselves are PyTorch's counters).
            cuda.empty_cache()
        m = Measure(self.mg)
        phase_id = self.mg._begin(item.nodeid)
        try:
            yield
        finally:
            self.mg._end(phase_id)
            m.end(limits.collect)
            item._memguard = (limits, m, phase_id)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        measured = getattr(item, "_memguard", None)
        if call.when != "call" or measured is None:
            return
        limits, m, phase_id = measured
        del item._memguard
        path = self.mg.report_path()
        # A new list: the item's own (which junitxml writes out) stays as the test made it.
        report.user_properties = list(report.user_properties) + [("memguard", {
            "nodeid": item.nodeid, "incremental_peak": m.incremental_peak, "peak": m.peak,
            "live_at_start": m.live0, "leaked": m.leaked, "gc_cuda_bytes_freed": m.gc_freed,
            "bytes_of": m.bytes_of, "report": path})]
        problems = self._check(limits, m)
        if not problems:
            return
        text = "\n".join(problems + self._sites_text(limits, m, phase_id, problems))
        if report.passed:
            report.outcome = "failed"
            report.longrepr = text
        else:
            report.sections.append(("memguard", text))

    def _check(self, limits, m):
        out = []
        if limits.memory is not None and m.incremental_peak > limits.memory:
            out.append(f"memguard: limit_gpu_memory: incremental peak {human_bytes(m.incremental_peak)} is over the "
                       f"limit of {human_bytes(limits.memory)} (peak {human_bytes(m.peak)} - live at the start "
                       f"{human_bytes(m.live0)}; bytes: {m.bytes_text()})")
        if limits.leaks is not None and m.leaked > limits.leaks:
            out.append(f"memguard: limit_gpu_leaks: {human_bytes(m.leaked)} more live after the test (after "
                       f"gc.collect()) than at its start, over the limit of {human_bytes(limits.leaks)} "
                       f"(live {human_bytes(m.live1)}, at the start {human_bytes(m.live0)}; bytes: {m.bytes_text()})")
        if limits.cycles and m.gc_freed > 0:
            out.append(f"memguard: no_tensor_cycles: garbage collections during the test (and the one at its end) "
                       f"freed {human_bytes(m.gc_freed)} of CUDA memory held by reference cycles")
        return out

    def _sites_text(self, limits, m, phase_id, problems):
        """The allocation sites behind the failures, from the report (flushed first)."""
        path = self.mg.report_path()
        if not path:
            return ["  (no report: memguard saw no CUDA allocation)"]
        self.mg.flush()
        lines = []
        segments = m.bytes_of == "torch" and not m.mg0.allocator_mode
        try:
            ph = self.sites.phase(path, phase_id)
            begin = ph["begin_t"]
            if any(p.startswith("memguard: limit_gpu_memory") for p in problems):
                top = self.sites.top(path, ph["peak_t"], since=begin)
                what = f"sites live at the test's peak in the report (t={ph['peak_t']:.6f} s), allocated during it"
                lines += _sites_lines(top["sites"], what, segments)
            if any(p.startswith("memguard: limit_gpu_leaks") for p in problems):
                top = self.sites.top(path, "exit", since=begin)
                lines += _sites_lines(top["sites"], "sites still live after the test, allocated during it", segments)
            if any(p.startswith("memguard: no_tensor_cycles") for p in problems):
                lines += self._cycle_sites(path, begin, segments)
            lines.append(f"  report: {path} (memguard phases {path}; memguard top {path} --since {begin!r})")
        except (RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
            lines.append(f"  (allocation sites unavailable: {e})")
        return lines

    def _cycle_sites(self, path, since, segments):
        """The sites of the blocks the collections freed: live at a collection's start, gone at its end."""
        freed = {}
        for c in self.sites.collections(path, since):
            end = c["time_s"]
            start = end - c["duration_s"]
            after = {(s["stack_id"], s["python_stack_id"]): s for s in self.sites.top(path, end, n=1000)["sites"]}
            for s in self.sites.top(path, start, n=1000)["sites"]:
                key = (s["stack_id"], s["python_stack_id"])
                left = after.get(key, {"bytes": 0, "blocks": 0})
                if s["bytes"] > left["bytes"]:
                    entry = freed.setdefault(key, dict(s, bytes=0, blocks=0))
                    entry["bytes"] += s["bytes"] - left["bytes"]
                    entry["blocks"] += max(0, s["blocks"] - left["blocks"])
        sites = sorted(freed.values(), key=lambda s: -s["bytes"])[:5]
        return _sites_lines(sites, "sites of the CUDA memory the collections freed", segments)
