# memguard's cycle collections after recompute and at steps (issue 21), embedded into libmemguard.so
# and run by it (src/python/cycles.cpp) in the torch side's namespace, after memguard_torch.py: it
# uses that file's _sys, _warn_once and _is_compiling, the switches the library sets (RECOMPUTE,
# RECOMPUTE_FUNCTIONS, GC_EVERY_STEPS, GC_GENERATION, from MEMGUARD_* variables parsed by the
# library) and the native _collect, which checks the safety rules (no stream capture anywhere, no
# dynamo compile, not inside a compiled region) and the time budget, and records the collection.
# memguard_torch.py calls _after_step and _install_recompute.
"""Collections of garbage cycles after a recomputed backward and every N steps (issue 21)."""

_RECOMPUTE_NAMES = frozenset(n.strip() for n in RECOMPUTE_FUNCTIONS.split(",") if n.strip())
recompute_collections = 0  # memguard's collections after a recomputed backward that ran (tests read them)
step_collections = 0


def _is_recompute_class(cls):
    """A Function subclass whose backward recomputes: named CheckpointFunction (PyTorch's reentrant
    checkpoint, Megatron-LM's tensor_parallel.random), or listed in MEMGUARD_RECOMPUTE_FUNCTIONS by
    class name or module.qualname."""
    name = cls.__name__
    return (name == "CheckpointFunction" or name in _RECOMPUTE_NAMES
            or f"{cls.__module__}.{cls.__qualname__}" in _RECOMPUTE_NAMES)


def _after_recompute(cls):
    global recompute_collections
    try:
        if _collect("recompute", 2) == 0:
            recompute_collections += 1
    except BaseException as e:
        _warn_once("memguard's collection after a recomputed backward failed", e)


def _wrap_backward(cls):
    """Replaces cls.backward (a staticmethod defined by cls) by one that calls it, then collects.
    BackwardCFunction looks `_forward_cls.backward` up at each backward (torch 1.x to 2.13), so the
    replacement takes effect for graphs built before it too."""
    orig = cls.__dict__.get("backward")
    fn = orig.__func__ if isinstance(orig, staticmethod) else None
    if fn is None or getattr(fn, "_memguard_recompute", False):
        return False
    import functools

    @functools.wraps(fn)
    def backward(ctx, *grads):
        result = fn(ctx, *grads)
        # Constant True while dynamo traces: the branch is not traced (no graph break).
        if _is_compiling is None or not _is_compiling():
            _after_recompute(cls)
        return result

    backward._memguard_recompute = True
    cls.backward = staticmethod(backward)
    return True


def _install_recompute():
    """Wraps the backward of the recompute classes that exist (a walk of Function's subclasses) and
    of those made later (FunctionMeta.__init__, which every autograd.Function class goes through)."""
    function = _sys.modules.get("torch.autograd.function")
    if function is None:
        return
    meta, base = function.FunctionMeta, function.Function
    stack, seen = [base], set()
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        try:
            stack.extend(type.__subclasses__(c))
        except Exception:
            continue
        if c is not base and _is_recompute_class(c):
            _wrap_backward(c)
    original_init = meta.__init__
    if getattr(original_init, "_memguard_recompute", False):
        return

    def __init__(cls, name, bases, attrs):
        original_init(cls, name, bases, attrs)
        try:
            if _is_recompute_class(cls):
                _wrap_backward(cls)
        except BaseException as e:
            _warn_once("memguard cannot follow a recompute function", e)

    __init__._memguard_recompute = True
    meta.__init__ = __init__


def _after_step(index):
    """MEMGUARD_GC_EVERY_STEPS=N: a collection of MEMGUARD_GC_GENERATION after every N-th step."""
    global step_collections
    if not GC_EVERY_STEPS or index % GC_EVERY_STEPS:
        return
    try:
        if _collect("step", GC_GENERATION) == 0:
            step_collections += 1
    except BaseException as e:
        _warn_once("memguard's collection at a step end failed", e)
