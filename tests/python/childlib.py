"""Helpers for the child processes of the Python tests (they run under LD_PRELOAD=libmemguard.so).

Nothing here imports torch at module level: test 7 runs children that must not import it.

- LeakyBackend: a dynamo backend that leaves compile garbage the way compile_garbage.py does: a
  reference cycle holding the frames of the compile and a real tensor, reachable until the compiled
  code first runs (dynamo's own post-compile gc.collect(1) then promotes it to the oldest
  generation), garbage afterwards.
- GcProbe: a gc.callbacks entry that records every collection with a snapshot of the test's
  context (the harness matches these to the report's Y records to learn each one's trigger).
- EndCallbacks: the test's own dynamo end-of-compile callback (trigger, compile id, thread).
- profile_owner(): who owns the calling thread's C-level profile function (memguard installs one
  with a NULL object, which sys.getprofile() cannot see).
"""
import ctypes
import gc
import json
import os
import sys
import threading
import weakref


def no_automatic_full_collections():
    """The interpreter's own full collections could free compile garbage at any moment; the tests
    turn them off (generation-2 threshold out of reach; generations 0 and 1 keep their thresholds),
    so that whatever frees the garbage is the collection the test is about."""
    g0, g1, _ = gc.get_threshold()
    gc.set_threshold(g0, g1, 10 ** 9)


def write_result(path, result):
    with open(path, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)


# --- compile garbage ------------------------------------------------------------------------------

class LeakyBackend:
    """Backend whose compiles leave a reference cycle holding `hold_numel` floats.

    Each compile appends (compile_id, weakref to the held tensor) to `leaked`. The cycle is kept
    reachable (in `keepalive`) until the compiled callable first runs, then dropped. With
    `promote=True` the backend runs gc.collect(1) itself (needed where dynamo does not, e.g. the
    backward compilers). With `until_run=False` the cycle is dropped when the backend returns (after
    the promotion): garbage as soon as the compile ends. `raise_on_run` (a callable returning bool) makes the compiled callable raise
    RuntimeError after dropping the cycle: an error inside the compiled region.
    """

    def __init__(self, hold_numel=1 << 16, promote=False, boxed=False, raise_on_run=None, on_compile=None,
                 until_run=True):
        self.hold_numel = hold_numel
        self.until_run = until_run
        self.promote = promote
        self.boxed = boxed
        self.raise_on_run = raise_on_run
        self.on_compile = on_compile
        self.leaked = []      # [(compile_id, weakref)]
        self.keepalive = []
        self.in_backend = 0   # >0 while a compile is inside this backend (any thread)
        self.compiles = 0

    def alive(self, ids=None):
        return sum(1 for cid, r in self.leaked if r() is not None and (ids is None or cid in ids))

    def __call__(self, gm, example_inputs):
        import torch
        self.in_backend += 1
        try:
            if self.on_compile is not None:
                self.on_compile()
            cid = str(torch._guards.CompileContext.current_compile_id())
            frames = []
            frame = sys._getframe()
            while frame is not None:
                frames.append(frame)
                frame = frame.f_back
            scratch = torch.ones(self.hold_numel)
            self.leaked.append((cid, weakref.ref(scratch)))
            cycle = {"frames": frames, "scratch": scratch, "compile_id": cid}
            cycle["self"] = cycle
            self.keepalive.append(cycle)
            del frame, frames, cycle, scratch
            if self.promote:
                gc.collect(1)
            if not self.until_run:
                self.keepalive.clear()
            self.compiles += 1
            return self._runner(gm)
        finally:
            self.in_backend -= 1

    def _runner(self, gm):
        backend = self

        def run(*args):
            backend.keepalive.clear()  # from here on the cycle is garbage
            if backend.raise_on_run is not None and backend.raise_on_run():
                raise RuntimeError("raised inside the compiled region")
            return gm(*args[0]) if backend.boxed else gm.forward(*args)

        if self.boxed:
            run._boxed_call = True
        return run


# --- gc probe -------------------------------------------------------------------------------------

class GcProbe:
    """Records every garbage collection after start(): generation, collected, uncollectable, the
    native thread id and ctx() evaluated at the collection's start. Because memguard's own
    gc.callbacks entry was appended first, both see the same collections in the same order, and the
    harness finds this list as one contiguous run of the report's Y records.

    start() and stop() each run a marker collection (gen 0) with a distinctive number of objects
    collected, so that the match is unique."""

    def __init__(self, ctx=None):
        self.ctx = ctx or (lambda: {})
        self.events = []
        self._pending = {}

    def _callback(self, phase, info):
        tid = threading.get_native_id()
        if phase == "start":
            try:
                self._pending[tid] = self.ctx()
            except Exception as e:  # the probe must never break a collection
                self._pending[tid] = {"ctx_error": repr(e)}
            return
        self.events.append({"generation": info["generation"], "collected": info["collected"],
                            "uncollectable": info["uncollectable"], "tid": tid,
                            "ctx": self._pending.pop(tid, {})})

    @staticmethod
    def _marker(n):
        gc.collect(0)
        junk = []
        for _ in range(n):
            x = []
            x.append(x)
            junk.append(x)
        del x, junk
        gc.collect(0)

    def start(self):
        gc.callbacks.append(self._callback)
        self._marker(173)
        return self

    def stop(self):
        self._marker(181)
        gc.callbacks.remove(self._callback)
        return self.events


# --- the test's own end-of-compile callback -------------------------------------------------------

class EndCallbacks:
    """Records dynamo's end-of-compile callbacks: trigger, compile id, native thread id and whether
    memguard's profile function was installed on that thread at that moment (memguard's callback
    was registered first, so it has already run)."""

    def __init__(self):
        self.events = []
        self.register()

    def register(self):
        import torch._dynamo.callback as cb
        cb.callback_handler.register_end_callback(self._callback)

    def _callback(self, args):
        self.events.append({"trigger": args.callback_trigger.name, "compile_id": str(args.compile_id),
                            "tid": threading.get_native_id(), "profile": profile_owner()})


# --- the thread's C profile function --------------------------------------------------------------

_ts_get = ctypes.pythonapi.PyThreadState_Get
_ts_get.restype = ctypes.c_void_p
_profilefunc_offset = None


def _calibrate():
    """Finds tstate->c_profilefunc: sys.setprofile(obj) stores obj in c_profileobj, which follows
    c_profilefunc and c_tracefunc in PyThreadState on CPython 3.10 to 3.13."""
    def marker(*args):
        pass

    saved = sys.getprofile()
    if saved is not None:
        raise RuntimeError("calibrate with no Python profiler active")
    sys.setprofile(marker)
    try:
        words = (ctypes.c_void_p * 96).from_address(_ts_get())
        hits = [i for i in range(96) if words[i] == id(marker)]
    finally:
        sys.setprofile(None)
    if len(hits) != 1:
        raise RuntimeError(f"cannot locate c_profileobj in PyThreadState: {hits}")
    return (hits[0] - 2) * ctypes.sizeof(ctypes.c_void_p)


def calibrate_profile_probe():
    """Runs once, when this module is imported (before any compile, so no profile function of
    memguard's can be replaced by the calibration's sys.setprofile)."""
    global _profilefunc_offset
    if _profilefunc_offset is None:
        _profilefunc_offset = _calibrate()


def _memguard_ranges():
    ranges = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].endswith("libmemguard.so"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                ranges.append((lo, hi))
    return ranges


def profile_func_address():
    # No Python-level call before the read: each return of one could be memguard's safe point.
    return ctypes.c_void_p.from_address(_ts_get() + _profilefunc_offset).value or 0


def profile_owner():
    """'none', 'memguard' (a function inside libmemguard.so) or 'other'. Reads the thread state
    before any Python-level call returns."""
    addr = ctypes.c_void_p.from_address(_ts_get() + _profilefunc_offset).value or 0
    if addr == 0:
        return "none"
    return "memguard" if any(lo <= addr < hi for lo, hi in _memguard_ranges()) else "other"


def compiling():
    """True while dynamo compiles on this thread (a compile context is set)."""
    import torch._guards
    return torch._guards.CompileContext.try_get() is not None


def convert_frame_on_stack():
    """True while dynamo's frame conversion (convert_frame.py) is on this thread's stack."""
    f = sys._getframe()
    while f is not None:
        if f.f_code.co_filename.endswith(os.path.join("_dynamo", "convert_frame.py")):
            return True
        f = f.f_back
    return False


def memguard_loaded():
    return bool(_memguard_ranges())


calibrate_profile_probe()
