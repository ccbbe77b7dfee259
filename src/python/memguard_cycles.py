# memguard's cycle collections after recompute and at steps (issue 21, prototype), embedded into
# libmemguard.so and run by it (src/python/insight.cpp) in the torch side's namespace, after
# memguard_torch.py: it uses that file's _gc, _sys, _torch, _warn_once and _is_compiling, and
# memguard_torch.py calls its _after_step and _install_recompute.
"""Collections of garbage cycles after a recomputed backward and every N steps (issue 21)."""
#
# The switches are read from the environment here for the prototype; the library should parse and
# hand them in (config.cpp, like STEPS) so that a bad value gets memguard's one clear message.

def _env_int(name, default):
    import os
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        _warn_once(f"memguard: {name} is not an integer; using {default}")
        return default


RECOMPUTE = _env_int("MEMGUARD_COLLECT_RECOMPUTE_GARBAGE", 1)
RECOMPUTE_FUNCTIONS = frozenset(n for n in __import__("os").environ.get("MEMGUARD_RECOMPUTE_FUNCTIONS", "").split(",")
                                if n.strip())
GC_EVERY_STEPS = max(0, _env_int("MEMGUARD_GC_EVERY_STEPS", 0))
GC_GENERATION = min(2, max(0, _env_int("MEMGUARD_GC_GENERATION", 2)))
recompute_collections = 0  # memguard's collections after a recomputed backward (a test reads them)
step_collections = 0


def _is_recompute_class(cls):
    """A Function subclass whose backward recomputes: named CheckpointFunction (PyTorch's reentrant
    checkpoint, Megatron-LM's tensor_parallel.random), or listed in MEMGUARD_RECOMPUTE_FUNCTIONS by
    class name or module.qualname."""
    name = cls.__name__
    return (name == "CheckpointFunction" or name in RECOMPUTE_FUNCTIONS
            or f"{cls.__module__}.{cls.__qualname__}" in RECOMPUTE_FUNCTIONS)


def _collect_allowed():
    """Today's safe-point rules, from Python: not while dynamo traces or compiles on this thread,
    not inside a torch.compile region. (Stream captures: the library knows them; the native
    collection call the next step adds checks them, see the notes.)"""
    torch = _torch()
    if _is_compiling is not None and _is_compiling():
        return False
    try:
        if torch._guards.CompileContext.try_get() is not None:
            return False
        if torch._C._dynamo.eval_frame.get_eval_frame_callback() not in (None, False):
            return False
    except Exception:
        pass
    try:
        cuda = torch.cuda
        if cuda.is_initialized() and cuda.is_current_stream_capturing():
            return False
    except Exception:
        pass
    return True


def _after_recompute(cls):
    global recompute_collections
    try:
        if not _collect_allowed():
            return
        recompute_collections += 1
        _gc.collect()
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
        if _collect_allowed():
            step_collections += 1
            _gc.collect(GC_GENERATION)
    except BaseException as e:
        _warn_once("memguard's collection at a step end failed", e)

