# memguard's "what held it" (issue 21), embedded into libmemguard.so and run by it
# (src/python/cycles.cpp) in the torch side's namespace, after memguard_torch.py and
# memguard_cycles.py: it uses that namespace's device_of (the seam CPU tests replace), _warn_once and
# the natives _retrack and _explain_*. The library calls explained_collect() instead of gc.collect()
# for its own collections (MEMGUARD_EXPLAIN_CYCLES=1) and for the program's gc.collect() calls (=all).
"""Explains the garbage of one collection without keeping it alive.

explained_collect(collect, generation, min_bytes) runs collect(generation) with gc.DEBUG_SAVEALL, so
the unreachable objects go to gc.garbage instead of being cleared. Finalizers (__del__) and weakref
callbacks have already run at that point, as in a plain collection (CPython runs them before it clears
or saves anything), and objects a finalizer resurrected are not in the garbage. It takes its own part
of gc.garbage out, looks at it within the garbage set only (which CUDA storages it held, what kinds of
objects it was, one chain of references from a holder to each of the largest storages), writes that
as records (j u y r), re-tracks the objects young and runs a generation-0 collection, which frees
them. What the program can see differently: its gc.callbacks see two collections, gc.get_stats()
counts both, and the memory is freed after the look (bounded by LOOK_SECONDS) instead of during the
first pass. A program that sets DEBUG_SAVEALL itself gets a plain collection: its gc.garbage is its own.
"""
import gc as _gc
import sys as _sys
import time as _time

KIND_ORDER = ("frame", "autograd_function", "autograd_node", "dynamo", "closure", "exception", "traceback",
              "tensor")
LOOK_SECONDS = 0.2   # the look stops here (the j record says it is partial); the garbage is freed after
GROUPS_PER_KIND = 8  # u records per kind (the most frequent), and the most frequent plain types
TOP_CHAINS = 4       # storages with a referrer chain (the largest)
MAX_CHAIN = 16       # steps of one chain
MAX_TENSORS = 64     # y records per explanation (the largest); j counts them all
_DYNAMO_MODULES = ("torch._dynamo", "torch.fx", "torch._functorch", "torch._inductor", "torch._guards",
                   "torch._subclasses", "torch._higher_order_ops")

_get_attribute = object.__getattribute__  # reads that bypass a class's own __getattribute__/__getattr__


def _device(t):
    d = globals().get("device_of")
    if d is not None:
        return d(t)
    dev = t.device
    return (dev.index or 0) if dev.type == "cuda" else None


def _builtin(tp, name):
    return tp.__name__ == name and tp.__module__ == "builtins"


def _kind(o, tp, torch):
    """The group an object of the garbage belongs to, or None."""
    mod = getattr(tp, "__module__", "") or ""
    if mod == "builtins":
        name = tp.__name__
        if name == "frame":
            return "frame"
        if name == "cell":
            return "closure"
        if name == "function":
            return "closure" if o.__closure__ else None
        if name == "traceback":
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
    if mod.startswith(_DYNAMO_MODULES):
        return "dynamo"
    return None


def _where(code, line):
    return f"{code.co_filename}:{line}"


def _group_name(o, tp, kind):
    if kind == "frame":
        c = o.f_code
        return f"{c.co_name} {_where(c, o.f_lineno)}"
    if kind == "closure" and tp.__name__ == "function":
        c = o.__code__
        return f"{o.__qualname__} {_where(c, c.co_firstlineno)}"
    return f"{tp.__module__}.{tp.__qualname__}"


def _human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024


def _describe(o, torch):
    """One step of a chain: a frame, a function, a tensor, or the object's type."""
    tp = type(o)
    if _builtin(tp, "frame"):
        c = o.f_code
        return f"frame {c.co_name} {_where(c, o.f_lineno)}"
    if _builtin(tp, "function"):
        c = o.__code__
        return f"function {o.__qualname__} {_where(c, c.co_firstlineno)}"
    if torch is not None and isinstance(o, torch.Tensor):
        try:
            shape = ", ".join(str(d) for d in o.shape)
            nbytes = o.untyped_storage().nbytes()
            return f"Tensor {str(o.dtype).replace('torch.', '')}[{shape}] ({_human(nbytes)})"
        except Exception:
            pass
    return f"{tp.__module__}.{tp.__qualname__}"


def _edge(parent, child, torch):
    """How `parent` refers to `child`: `local x`, `key 'a'`, `[3]`, `.attr`, `cell_contents`,
    `.grad_fn`, or '' when not found."""
    try:
        tp = type(parent)
        if _builtin(tp, "frame"):
            for k, v in parent.f_locals.items():
                if v is child:
                    return f"local {k}"
            return ""
        if tp is dict:
            for k, v in parent.items():
                if v is child:
                    return f"key {repr(k)[:60]}"
            return ""
        if tp is list or tp is tuple:
            for i, v in enumerate(parent[:100000]):
                if v is child:
                    return f"[{i}]"
            return ""
        if _builtin(tp, "cell"):
            return "cell_contents"
        if _builtin(tp, "function"):
            return "__closure__" if child is parent.__closure__ else ""
        if torch is not None and isinstance(parent, torch.Tensor):
            if torch.Tensor.grad_fn.__get__(parent) is child:
                return ".grad_fn"
        try:
            d = _get_attribute(parent, "__dict__")
        except Exception:
            d = None
        if type(d) is dict:
            if d is child:
                return "__dict__"
            for k, v in d.items():
                if v is child:
                    return f".{k}"
    except Exception:
        pass
    return ""


def _category(t, torch):
    return "parameter" if isinstance(t, torch.nn.Parameter) else "other_tensor"


class _Look:
    """The look at one collection's garbage: plain data only (nothing refers to the garbage)."""

    def __init__(self, garbage, deadline):
        self.objects = len(garbage)
        self.complete = True
        self.deadline = deadline
        self.types = {}
        self.groups = {k: {} for k in KIND_ORDER}
        self.held = {}      # (kind, group name) -> bytes of the listed storages an object of it holds
        self.storages = {}  # data_ptr -> [device, nbytes, holder id, how, category, holder class]
        self.chains = {}    # data_ptr -> ((object, edge), ...)

    def late(self):
        if _time.perf_counter() > self.deadline:
            self.complete = False
        return not self.complete

    def add_storage(self, t, holder, how, category, holder_class, torch):
        try:
            dev = _device(t)
            if dev is None:
                return
            st = t.untyped_storage()
            ptr = st.data_ptr()
            if ptr and ptr not in self.storages:
                self.storages[ptr] = [dev, st.nbytes(), holder, how, category, holder_class]
        except Exception:
            pass  # meta, fake or freed tensors

    @property
    def cuda_bytes(self):
        return sum(s[1] for s in self.storages.values())


def _look(garbage, deadline):
    torch = _sys.modules.get("torch")
    look = _Look(garbage, deadline)
    ids = {id(o): o for o in garbage}
    for i, o in enumerate(garbage):
        if i % 1024 == 1023 and look.late():
            break
        tp = type(o)
        look.types[tp.__qualname__] = look.types.get(tp.__qualname__, 0) + 1
        kind = _kind(o, tp, torch)
        if kind is None:
            continue
        name = _group_name(o, tp, kind)
        g = look.groups[kind]
        g[name] = g.get(name, 0) + 1
        if kind == "tensor":
            look.add_storage(o, id(o), "tensor", _category(o, torch), None, torch)
        elif kind == "autograd_function":
            # Tensors saved by save_for_backward live in C++ (SavedVariable), not as Python objects
            # of the garbage: read through _raw_saved_tensors (.data runs no unpack hook).
            try:
                for s in o._raw_saved_tensors or ():
                    data = getattr(s, "data", None)
                    if data is not None:
                        look.add_storage(data, id(o), "saved", "activation", tp.__qualname__, torch)
            except Exception:
                pass
    if not look.storages or look.late():
        return look
    listed = sorted(look.storages.items(), key=lambda kv: (-kv[1][1], kv[0]))[:MAX_TENSORS]
    referrers = {}  # id -> ids of the garbage objects that refer to it
    for i, o in enumerate(garbage):
        if i % 1024 == 1023 and look.late():
            return look
        for r in _gc.get_referents(o):
            if id(r) in ids:
                referrers.setdefault(id(r), []).append(id(o))
    # Every listed storage's holder (its group is credited with the bytes); the largest keep the chain.
    for rank, (ptr, (_, nbytes, holder, how, _, _)) in enumerate(listed):
        if look.late():
            break
        chain, hid = _chain(ids, referrers, holder, torch)
        o = ids[hid]
        tp = type(o)
        kind = _kind(o, tp, torch)
        if kind is not None and not (hid == holder and kind == "tensor"):  # a tensor is not its own holder
            key = (kind, _group_name(o, tp, kind))
            look.held[key] = look.held.get(key, 0) + nbytes
        if rank < TOP_CHAINS:
            if how == "saved":
                chain = chain[:-1] + ((chain[-1][0], ".saved_tensors"), ("saved tensor", ""))
            look.chains[ptr] = chain
    return look


def _chain(ids, referrers, start, torch):
    """One referrer chain, holder first, ending at the object `start`, and the holder's id: a
    breadth-first walk back over the in-garbage referrers that stops at the nearest frame,
    autograd.Function context, function with a closure, exception or dynamo object (what a user can
    act on), else at the farthest object reached."""
    back = {start: None}
    frontier = [start]
    found = None
    last = start
    depth = 0
    while frontier and found is None and depth < MAX_CHAIN:
        nxt = []
        for oid in frontier:
            for rid in referrers.get(oid, ()):
                if rid in back:
                    continue
                back[rid] = oid
                o = ids[rid]
                tp = type(o)
                if _kind(o, tp, torch) in ("frame", "autograd_function", "closure", "exception", "dynamo") \
                        and not _builtin(tp, "cell"):  # a cell's function says more
                    found = rid
                    break
                nxt.append(rid)
                last = rid
            if found is not None:
                break
        frontier = nxt
        depth += 1
    if found is None:  # no holder refers to it: the start is its own holder when it is one (a context)
        o = ids[start]
        if _kind(o, type(o), torch) in ("frame", "autograd_function", "closure", "exception", "dynamo"):
            last = start
    steps = []
    holder = oid = found if found is not None else last
    while oid is not None:
        nxt = back[oid]
        steps.append((_describe(ids[oid], torch), _edge(ids[oid], ids[nxt], torch) if nxt is not None else ""))
        oid = nxt
    return tuple(steps), holder


def _write(look, analysis_ns):
    """The look as records: j, then u (per kind the groups holding the most bytes, then the most
    frequent; then the plain types), y
    (largest first) and r (the chains)."""
    storages = sorted(look.storages.items(), key=lambda kv: (-kv[1][1], kv[0]))
    complete = look.complete and len(storages) <= MAX_TENSORS
    eid = _explain_begin(look.objects, len(storages), look.cuda_bytes, analysis_ns, 1 if complete else 0)
    if not eid:
        return 0
    for kind in KIND_ORDER:  # per kind: the groups that held the most bytes, then the most frequent
        items = sorted(look.groups[kind].items(), key=lambda kv: (-look.held.get((kind, kv[0]), 0), -kv[1], kv[0]))
        for name, n in items[:GROUPS_PER_KIND]:
            _explain_group(eid, kind, n, look.held.get((kind, name), 0), name)
    for name, n in sorted(look.types.items(), key=lambda kv: (-kv[1], kv[0]))[:GROUPS_PER_KIND]:
        _explain_group(eid, "type", n, 0, name)
    for ptr, (dev, nbytes, _, how, category, holder_class) in storages[:MAX_TENSORS]:
        _explain_tensor(eid, dev, ptr, nbytes, how, category, holder_class)
    for ptr, chain in look.chains.items():
        for step, (what, edge) in enumerate(chain):
            _explain_chain(eid, ptr, step, what, edge or None)
    return eid


def _no_torch_function():
    torch = _sys.modules.get("torch")
    try:
        return torch._C.DisableTorchFunctionSubclass()  # tensor subclasses' overrides stay out of the look
    except Exception:
        import contextlib
        return contextlib.nullcontext()


def explained_collect(collect, generation=2, min_bytes=0):
    """collect(generation) with its garbage saved, looked at, written as records when it held at least
    min_bytes of CUDA tensors, then freed by a generation-0 collection. Returns what the first
    collection returned, as gc.collect() does."""
    old = _gc.get_debug()
    if old & _gc.DEBUG_SAVEALL:
        return collect(generation)
    n0 = len(_gc.garbage)
    _gc.set_debug(old | _gc.DEBUG_SAVEALL)
    try:
        n = collect(generation)
    finally:
        _gc.set_debug(old)
    garbage = _gc.garbage[n0:]
    del _gc.garbage[n0:]
    if not garbage:
        return n
    was_enabled = _gc.isenabled()
    young = False
    try:
        _gc.disable()  # no automatic collection runs inside the look (it would find the garbage alive)
        t0 = _time.perf_counter_ns()
        try:
            with _no_torch_function():
                look = _look(garbage, _time.perf_counter() + LOOK_SECONDS)
                if look.storages and look.cuda_bytes >= min_bytes:
                    _write(look, _time.perf_counter_ns() - t0)
            look = None
        except BaseException as e:
            _warn_once("memguard could not explain a collection's garbage", e)
        young = _retrack(garbage) > 0
    finally:
        del garbage
        if was_enabled:
            _gc.enable()
        # Re-tracked objects are in generation 0; saved ones otherwise went to the next generation
        # (the oldest stays the oldest): collect that one.
        collect(0 if young else min(generation + 1, 2))
    return n
