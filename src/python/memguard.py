# memguard's Python module, embedded into libmemguard.so at build time (embed_text.cmake) and run by
# it (src/python/module.cpp) in the module's namespace, which already holds the native functions
# _begin, _end, _mark, _active, _report_path, _flush, _stats, _reset_peak and the insight natives
# (python/insight.h: _step, _torch, ...).
"""memguard's in-process API, provided by libmemguard.so (LD_PRELOAD); no file on disk is involved.

    import memguard

    with memguard.phase("forward"):
        loss = model(batch)

    @memguard.phase("optimizer")
    def step():
        opt.step()

    memguard.mark("step 3")

    for batch in data:                 # a loop without a torch optimizer: say where steps end
        train(batch)
        memguard.step()                # torch.optim optimizers' steps are found without this

    before = memguard.stats()          # live and peak GPU bytes now, without reading the report
    memguard.reset_peak()

For each phase the report gives the GPU bytes live at its begin, its peak, and its incremental peak
(`memguard phases REPORT`). This module exists only in a process that runs with libmemguard.so
preloaded (and MEMGUARD_ENABLE not 0), always as `_memguard`. With the torch-memguard package
installed, `import memguard` gives that package, which re-exports this module under the library
and does nothing without it, so the import needs no guard; without the package, `import memguard`
gives this module.
"""
import collections as _collections
import functools as _functools
import threading as _threading

__all__ = ["phase", "mark", "step", "active", "report_path", "flush", "stats", "reset_peak", "Stats"]

class Stats(_collections.namedtuple("Stats", [
        "live_bytes", "peak_bytes", "gpu_live_bytes", "gpu_peak_bytes", "allocator_mode",
        "gc_collections", "gc_freeing_collections", "gc_cuda_bytes_freed"])):
    """memguard's counters at one moment (memguard.stats()).

    live_bytes, peak_bytes: what `memguard phases` counts: in allocator mode
        (MEMGUARD_ALLOCATOR=memguard) the tensor blocks of memguard's allocator
        (torch.cuda.memory_allocated()); otherwise the GPU memory memguard's hooks saw (cudaMalloc
        and friends: with PyTorch's own allocator, its cached segments). peak_bytes is the most
        live at once since the last reset_peak().
    gpu_live_bytes, gpu_peak_bytes: the GPU memory the hooks saw, in every mode (allocator mode:
        its segments, torch.cuda.memory_reserved()).
    allocator_mode: True when memguard is PyTorch's allocator.
    gc_collections, gc_freeing_collections, gc_cuda_bytes_freed: garbage collections so far, those
        that freed CUDA memory, and the CUDA bytes those freed (as `memguard cycles` counts them).
    """
    __slots__ = ()


def _device(device):
    if device is None:
        return -1
    if isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < 64:
        raise ValueError(f"device must be None or a CUDA device number 0-63, not {device!r}")
    return device


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


def stats(device=None):
    """memguard's counters now, as a Stats tuple: of CUDA device `device`, or of every device
    (None: sums; the peaks are each device's own peak, summed). Cheap (a few atomic reads); it
    never reads the report."""
    gpu_live, gpu_peak, tensor_live, tensor_peak, gcs, freeing, gc_bytes = _stats(_device(device))
    tensors = tensor_live >= 0
    return Stats(tensor_live if tensors else gpu_live, tensor_peak if tensors else gpu_peak,
                 gpu_live, gpu_peak, tensors, gcs, freeing, gc_bytes)


def reset_peak(device=None):
    """Starts new peaks (stats().peak_bytes, gpu_peak_bytes) at the bytes live now, on `device` or
    on every device (None). In allocator mode this also resets PyTorch's peaks
    (torch.cuda.reset_peak_memory_stats()): they are the same counters."""
    _reset_peak(_device(device))


def mark(name):
    """Records an instant event called `name`."""
    _mark(str(name))


def step(name=""):
    """Marks the end of a training step (`memguard steps REPORT`), with the tags of the model's
    tensors at that moment when torch is loaded. Steps of torch.optim optimizers are found without
    it: call it only in a loop that has none (calling both counts each step twice)."""
    ns = _torch()
    if ns is not None:
        ns.api_step(str(name))
    else:
        _step(1, str(name))


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
