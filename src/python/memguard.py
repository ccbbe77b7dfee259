# memguard's Python module, embedded into libmemguard.so at build time (embed_text.cmake) and run by
# it (src/python/module.cpp) in the module's namespace, which already holds the native functions
# _begin, _end, _mark, _active, _report_path and _flush.
"""memguard's in-process API, provided by libmemguard.so (LD_PRELOAD); no file on disk is involved.

    import memguard

    with memguard.phase("forward"):
        loss = model(batch)

    @memguard.phase("optimizer")
    def step():
        opt.step()

    memguard.mark("step 3")

For each phase the report gives the GPU bytes live at its begin, its peak, and its incremental peak
(`memguard phases REPORT`). The module exists only in a process that runs with libmemguard.so
preloaded (and MEMGUARD_ENABLE not 0); code that must also run without memguard guards the import.
"""
import functools as _functools
import threading as _threading

__all__ = ["phase", "mark", "active", "report_path", "flush"]


def active():
    """True while memguard records this process."""
    return bool(_active())


def report_path():
    """The path of this process's report, or None while none exists yet (it is created on the first
    CUDA allocation)."""
    return _report_path() or None


def flush():
    """Writes the records buffered so far to the report; False when no report exists yet."""
    return _flush() == 0


def mark(name):
    """Records an instant event called `name`."""
    _mark(str(name))


class phase:
    """A named phase of the run: `with memguard.phase(name):` or `@memguard.phase(name)`.

    The phase ends when the block or the call ends, also through an exception. One object may be
    entered by several threads at once, and nested: each entry is its own phase. A decorated
    function makes a phase per call (coroutine functions: per awaited call)."""

    __slots__ = ("name", "_open")

    def __init__(self, name):
        self.name = str(name)
        self._open = {}  # thread ident -> ids of this object's phases open on that thread

    def __enter__(self):
        pid = _begin(self.name)
        self._open.setdefault(_threading.get_ident(), []).append(pid)
        return self

    def __exit__(self, exc_type, exc, tb):
        ident = _threading.get_ident()
        ids = self._open.get(ident)
        if ids:
            _end(ids.pop())
            if not ids:
                del self._open[ident]
        return False

    def __call__(self, fn):
        name = self.name
        import inspect
        if inspect.iscoroutinefunction(fn):
            @_functools.wraps(fn)
            async def run_async(*args, **kwargs):
                with phase(name):
                    return await fn(*args, **kwargs)
            return run_async

        @_functools.wraps(fn)
        def run(*args, **kwargs):
            with phase(name):
                return fn(*args, **kwargs)
        return run

    def __repr__(self):
        return f"memguard.phase({self.name!r})"
