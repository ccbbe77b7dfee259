"""memguard's Python package (placeholder in the pytest worktree: the wheel engineer's __init__.py
replaces this file; it must keep re-exporting stats, reset_peak and Stats, see pytest_plugin.py).

Under LD_PRELOAD=libmemguard.so the library's embedded module `_memguard` is re-exported; without
it the same names are cheap no-ops and active() is False.
"""
try:
    import _memguard
except ImportError:
    _memguard = None

if _memguard is not None:
    from _memguard import *  # noqa: F401,F403
    from _memguard import __all__  # noqa: F401
else:
    import collections as _collections

    __all__ = ["phase", "mark", "active", "report_path", "flush", "stats", "reset_peak", "Stats"]

    class Stats(_collections.namedtuple("Stats", [
            "live_bytes", "peak_bytes", "gpu_live_bytes", "gpu_peak_bytes", "allocator_mode",
            "gc_collections", "gc_freeing_collections", "gc_cuda_bytes_freed"])):
        """memguard's counters (all zero: memguard is not loaded)."""
        __slots__ = ()

    def active():
        return False

    def report_path():
        return None

    def flush():
        return False

    def mark(name):
        pass

    def stats(device=None):
        """All zero: memguard is not loaded."""
        return Stats(0, 0, 0, 0, False, 0, 0, 0)

    def reset_peak(device=None):
        pass

    class phase:
        def __init__(self, name):
            self.name = str(name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def __call__(self, fn):
            return fn
