# memguard's "what held it" (issue 21), a prototype: to be embedded into libmemguard.so (embed_text.cmake)
# and run in the torch side's namespace, which provides `device_of` (the seam the CPU tests replace).
# Until the library runs it, tests exec() it into a namespace of their own.
"""Explains the garbage of one collection without keeping it alive.

`explained_collect(collect, generation)` runs `collect(generation)` with gc.DEBUG_SAVEALL, so the
unreachable objects go to gc.garbage instead of being cleared; finalizers (``__del__``) and weakref
callbacks have already run at that point, as in a plain collection (CPython runs them before it
clears or saves anything), and objects a finalizer resurrected are not in the garbage. It takes its
own part of gc.garbage out, analyses it within the garbage set only, drops every reference and
collects again, which frees the garbage. What the program can see differently: its gc.callbacks see
two collections (and the objects counted twice), gc.get_stats() counts both, and the memory is freed
after the analysis instead of during the first collection.
"""
import gc as _gc
import sys as _sys

KIND_ORDER = ("frame", "autograd_function", "autograd_node", "dynamo", "closure", "exception", "traceback",
              "tensor")


def _device_of(t):
    d = globals().get("device_of")
    if d is not None:
        return d(t)
    dev = t.device
    return (dev.index or 0) if dev.type == "cuda" else None


def _kind(o, tp, torch):
    """The group an object of the garbage belongs to, or None."""
    mod = getattr(tp, "__module__", "") or ""
    name = tp.__name__
    if name == "frame" and tp.__module__ == "builtins":
        return "frame"
    if name in ("cell", "function") and tp.__module__ == "builtins":
        return "closure" if name == "cell" or getattr(o, "__closure__", None) else None
    if name == "traceback" and mod == "builtins":
        return "traceback"
    if issubclass(tp, BaseException):
        return "exception"
    if torch is not None:
        if issubclass(tp, torch.autograd.function.BackwardCFunction):
            return "autograd_function"
        if issubclass(tp, torch.Tensor):
            return "tensor"
        if mod.startswith("torch.autograd") or mod == "torch._C._functions":
            return "autograd_node"
    if mod.startswith(("torch._dynamo", "torch.fx", "torch._functorch", "torch._inductor", "torch._guards",
                       "torch._subclasses")):
        return "dynamo"
    return None


def _edge(parent, child):
    """How `parent` refers to `child` (a local's name, a key, an attribute), or ''."""
    try:
        tp = type(parent)
        if tp.__name__ == "frame" and tp.__module__ == "builtins":
            for k, v in parent.f_locals.items():
                if v is child:
                    return k
            return ""
        if tp is dict:
            for k, v in parent.items():
                if v is child:
                    return repr(k)[:60]
            return ""
        if tp is list or tp is tuple:
            for i, v in enumerate(parent[:10000]):
                if v is child:
                    return f"[{i}]"
            return ""
        if tp.__name__ == "cell":
            return "cell_contents"
        if tp.__name__ == "function":
            return "__closure__" if child is parent.__closure__ else ""
        d = getattr(parent, "__dict__", None)
        if type(d) is dict:
            if d is child:
                return "__dict__"
            for k, v in d.items():
                if v is child:
                    return "." + str(k)
        if getattr(parent, "grad_fn", None) is child:
            return ".grad_fn"
    except Exception:
        pass
    return ""


def _describe(o):
    tp = type(o)
    if tp.__name__ == "frame" and tp.__module__ == "builtins":
        c = o.f_code
        return f"frame {c.co_name} {c.co_filename}:{o.f_lineno}"
    if tp.__name__ == "function":
        c = o.__code__
        return f"function {o.__qualname__} {c.co_filename}:{c.co_firstlineno}"
    return f"{tp.__module__}.{tp.__qualname__}"


def analyse(garbage, top_tensors=4, max_chain=16):
    """The explanation of `garbage` (a list of the objects of one collection). Returns plain data
    (str, int, tuples, dicts of those): nothing in it refers to the garbage."""
    torch = _sys.modules.get("torch")
    ids = {id(o): o for o in garbage}
    types = {}
    groups = {k: {} for k in KIND_ORDER}
    storages = {}  # data_ptr -> [device, nbytes, id of the first holder tensor or None, how]
    ctx_saved = {}  # id(tensor data) -> id(ctx): tensors saved by an autograd.Function context
    for o in garbage:
        tp = type(o)
        types[tp.__qualname__] = types.get(tp.__qualname__, 0) + 1
        kind = _kind(o, tp, torch)
        if kind is None:
            continue
        key = _describe(o) if kind in ("frame", "closure") else f"{tp.__module__}.{tp.__qualname__}"
        if kind == "closure" and tp.__name__ == "cell":
            key = "cell"
        groups[kind][key] = groups[kind].get(key, 0) + 1
        if kind == "tensor":
            _add_storage(storages, o, id(o), "tensor")
        elif kind == "autograd_function":
            # Tensors saved by save_for_backward live in C++ (SavedVariable), not in the garbage as
            # Python objects: read through _raw_saved_tensors (.data runs no unpack hook).
            try:
                for s in o._raw_saved_tensors or ():
                    data = getattr(s, "data", None)
                    if data is not None:
                        _add_storage(storages, data, id(o), "saved by " + tp.__qualname__)
            except Exception:
                pass
    # In-garbage referrers, for the chains.
    referrers = {}
    for o in garbage:
        for r in _gc.get_referents(o):
            if id(r) in ids:
                referrers.setdefault(id(r), []).append(id(o))
    tensors = sorted(storages.items(), key=lambda kv: (-kv[1][1], kv[0]))
    out_tensors = []
    for i, (ptr, (dev, nbytes, holder, how)) in enumerate(tensors):
        chain = _chain(ids, referrers, holder, max_chain) if i < top_tensors and holder is not None else ()
        out_tensors.append({"device": dev, "ptr": ptr, "bytes": nbytes, "how": how, "chain": chain})
    return {
        "objects": len(garbage),
        "types": sorted(types.items(), key=lambda kv: (-kv[1], kv[0])),
        "groups": {k: sorted(v.items(), key=lambda kv: (-kv[1], kv[0])) for k, v in groups.items() if v},
        "tensors": out_tensors,
        "cuda_bytes": sum(t["bytes"] for t in out_tensors),
    }


def _add_storage(storages, t, holder, how):
    try:
        dev = _device_of(t)
        if dev is None:
            return
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr and ptr not in storages:
            storages[ptr] = [dev, st.nbytes(), holder, how]
    except Exception:
        pass  # meta, fake or freed tensors


def _chain(ids, referrers, start, max_chain):
    """One referrer chain, holder first, ending at the object `start`: a breadth-first walk back over
    the in-garbage referrers that stops at the nearest frame, autograd.Function context, closure or
    exception (what a user can act on), else at the farthest object reached."""
    torch = _sys.modules.get("torch")
    back = {start: None}
    frontier = [start]
    found = None
    last = start
    depth = 0
    while frontier and found is None and depth < max_chain:
        nxt = []
        for oid in frontier:
            for rid in referrers.get(oid, ()):
                if rid in back:
                    continue
                back[rid] = oid
                o = ids[rid]
                if _kind(o, type(o), torch) in ("frame", "autograd_function", "closure", "exception", "dynamo") and \
                        type(o).__name__ != "cell":  # a cell's function says more
                    found = rid
                    break
                nxt.append(rid)
                last = rid
            if found is not None:
                break
        frontier = nxt
        depth += 1
    steps = []
    oid = found if found is not None else last
    while oid is not None:
        nxt = back[oid]
        steps.append((_describe(ids[oid]), _edge(ids[oid], ids[nxt]) if nxt is not None else ""))
        oid = nxt
    return tuple(steps)


def explained_collect(collect, generation=2, retrack=None):
    """Runs collect(generation) with its garbage saved, analysed, then freed by a second collection.
    Returns (what the first collection returned, the explanation or None). No explanation when the
    program itself saves garbage (gc.DEBUG_SAVEALL already set): its gc.garbage is left as it is.

    retrack(objects), when given, untracks and tracks each object again (PyObject_GC_UnTrack, then
    PyObject_GC_Track): they join generation 0, and a generation-0 collection frees them (about
    0.2 ms) instead of a second collection of the generation they were saved to (a full one for a
    full collection: as long as the first)."""
    old = _gc.get_debug()
    if old & _gc.DEBUG_SAVEALL:
        return collect(generation), None
    n0 = len(_gc.garbage)
    _gc.set_debug(old | _gc.DEBUG_SAVEALL)
    try:
        n = collect(generation)
    finally:
        _gc.set_debug(old)
    garbage = _gc.garbage[n0:]
    del _gc.garbage[n0:]
    explanation = None
    young = False
    try:
        explanation = analyse(garbage)
        if retrack is not None:
            retrack(garbage)
            young = True
    except Exception:
        explanation = None
    finally:
        del garbage
    # The saved objects went to the next generation (the oldest stays the oldest), or to generation 0
    # when re-tracked: collect that one.
    collect(0 if young else min(generation + 1, 2))
    return n, explanation


def ctypes_retrack():
    """retrack() through ctypes (an interpreter that exports its C API); the library would do it natively."""
    import ctypes
    untrack, track = ctypes.pythonapi.PyObject_GC_UnTrack, ctypes.pythonapi.PyObject_GC_Track
    untrack.argtypes = track.argtypes = [ctypes.py_object]
    untrack.restype = track.restype = None

    def retrack(objects):
        for o in objects:
            if _gc.is_tracked(o):
                untrack(o)
                track(o)
    return retrack


def format_explanation(e, width=100):
    """The explanation as text lines, as `memguard cycles --explain` might print one collection."""
    lines = [f"garbage: {e['objects']} objects, {e['cuda_bytes']} bytes of CUDA tensors in {len(e['tensors'])} storages"]
    for kind in KIND_ORDER:
        items = e["groups"].get(kind)
        if items:
            lines.append(f"  {kind}: " + ", ".join(f"{n} x {k}" for k, n in items[:6])[:width * 2])
    for t in e["tensors"][:4]:
        lines.append(f"  tensor {t['bytes']} bytes on cuda:{t['device']} at {t['ptr']:#x} ({t['how']})")
        for what, edge in t["chain"]:
            lines.append(f"      {what}" + (f" -> {edge}" if edge else ""))
    return lines
