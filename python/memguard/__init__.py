"""memguard: finds what holds GPU memory in PyTorch training.

Run a program under memguard (the library is preloaded, every CUDA allocation is recorded into a
report), then read the report:

    memguard run -- python train.py
    memguard top memguard.python3.12.4242.mgr

In the program, `import memguard` needs no guard: under the preload the calls below reach the
loaded library (its embedded module, `_memguard`); without it they do nothing and `active()` is
False.

    with memguard.phase("forward"):
        loss = model(batch)

    @memguard.phase("optimizer")
    def step():
        opt.step()

    memguard.mark("step 3")

`lib_path()` is the bundled libmemguard.so, for preloading by hand
(`LD_PRELOAD=$(python -c 'import memguard; print(memguard.lib_path())') python train.py`), and
`cli_path()` the bundled command line tool.
"""
import os as _os

_NATIVE = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "_native")


def lib_path():
    """The absolute path of the bundled libmemguard.so (FileNotFoundError when this package has
    none: a source checkout rather than an installed wheel)."""
    return _bundled(_os.path.join(_NATIVE, "lib", "libmemguard.so"))


def cli_path():
    """The absolute path of the bundled `memguard` command line tool (FileNotFoundError when this
    package has none: a source checkout rather than an installed wheel)."""
    return _bundled(_os.path.join(_NATIVE, "bin", "memguard"))


def _bundled(path):
    if not _os.path.isfile(path):
        raise FileNotFoundError(
            f"memguard: {path} is missing: this memguard package has no native part (a source checkout?); "
            "install the torch-memguard wheel (tools/build-wheel.sh builds one)")
    return path


def _read_version():
    try:
        from memguard._version import version  # written into the wheel by its build
        return version
    except ImportError:
        pass
    # A source checkout: python/memguard/ next to include/memguard/memguard.h, the version's source.
    header = _os.path.join(_os.path.dirname(_NATIVE), "..", "..", "include", "memguard", "memguard.h")
    try:
        with open(header) as f:
            for line in f:
                if line.startswith("#define MEMGUARD_VERSION_STRING "):
                    return line.split('"')[1]
    except OSError:
        pass
    return "unknown"


__version__ = _read_version()

try:
    # Importable only in a process running under the library (LD_PRELOAD, MEMGUARD_ENABLE not 0):
    # its import hook provides it (src/python/memguard_finder.py) and leaves the name memguard to
    # this package.
    import _memguard
except ImportError:
    _memguard = None

if _memguard is not None:
    globals().update({name: getattr(_memguard, name) for name in _memguard.__all__})
    __all__ = list(_memguard.__all__) + ["lib_path", "cli_path"]
else:
    # Without the library: the same calls, doing nothing. Keep this list in step with the embedded
    # module's __all__ (src/python/memguard.py); tests/wheel checks that the two agree.
    import collections as _collections

    __all__ = ["phase", "mark", "step", "active", "report_path", "flush", "stats", "reset_peak", "Stats",
               "lib_path", "cli_path"]

    class Stats(_collections.namedtuple("Stats", [
            "live_bytes", "peak_bytes", "gpu_live_bytes", "gpu_peak_bytes", "allocator_mode",
            "gc_collections", "gc_freeing_collections", "gc_cuda_bytes_freed"])):
        """memguard's counters (memguard.stats()); here all zero (not preloaded)."""
        __slots__ = ()

    def stats(device=None):
        """memguard's counters for `device` (None: all devices); here all zero (not preloaded)."""
        return Stats(0, 0, 0, 0, False, 0, 0, 0)

    def reset_peak(device=None):
        """Starts the peak of memguard.stats() afresh; here nothing (not preloaded)."""

    def active():
        """True while memguard records this process; here always False (not preloaded)."""
        return False

    def report_path():
        """The path of this process's report; here always None (not preloaded)."""
        return None

    def flush():
        """Writes the buffered records to the report; here always False (no report)."""
        return False

    def mark(name):
        """Records an instant event called `name`; here nothing (not preloaded)."""

    def step(name=""):
        """Marks the end of a training step (for programs without a torch optimizer); here nothing
        (not preloaded)."""

    class phase:
        """A named phase of the run (`with memguard.phase(name):` or `@memguard.phase(name)`);
        here it records nothing (not preloaded) and a decorated function is returned unchanged."""

        __slots__ = ("name",)

        def __init__(self, name):
            self.name = str(name)

        def __enter__(self):
            return self

        def __exit__(self, exc_type, exc, tb):
            return False

        def __call__(self, fn):
            return fn

        def __repr__(self):
            return f"memguard.phase({self.name!r})"
