# memguard's torch side, embedded into libmemguard.so at build time (embed_text.cmake) and run by it
# (src/python/insight.cpp) in a namespace of its own once torch.optim.optimizer is loaded. The
# namespace holds the module's native functions (_step, _moment_begin, _tag, _blocks, _moment_end,
# _oom_context, _oom_notice, _log, _stats, _want_imports, _allocator_mode, ...).
"""Steps, what the live tensors are, and out-of-memory context, with no code change (issue 20).

- Steps: PyTorch's global optimizer step hooks count each outermost ``optimizer.step()`` per thread
  (a subclass calling ``super().step()`` counts once) and write an ``s`` record; ``memguard.step()``
  does the same for programs without an optimizer.
- After a step, a step moment (``h`` ... ``k``) tags the storages of the parameters (named from the
  live modules), their gradients, the optimizers' state and the modules' buffers (``g``), and, when
  the step raised this process's GPU peak and PyTorch's own allocator is in use, PyTorch's allocator
  blocks (``d``). Step moments keep within a time budget (see Budget); the ``s`` records never skip.
- On an out-of-memory in PyTorch's allocator, its OOM observer writes an OOM moment (every live CUDA
  tensor it can find, saved tensors of autograd graphs included), the allocator blocks and the
  context (``x``), flushes the report and prints one line to stderr.

Every entry point catches everything: nothing here may raise into the user's step or allocation.
"""
import gc as _gc
import sys as _sys
import threading as _threading
import time as _time
import weakref as _weakref

# Category numbers: format/vocabulary.h's Category (the tensor ones).
PARAMETER, GRADIENT, NONPARAM_GRADIENT, OPTIMIZER_STATE, BUFFER, ACTIVATION, OTHER_TENSOR = range(7)
MOMENT_STEP, MOMENT_OOM, MOMENT_API = 0, 1, 2
SOURCE_OPTIMIZER, SOURCE_API = 0, 1
_BLOCK_STATES = {"active_allocated": 0, "active_pending_free": 1, "active_awaiting_free": 1, "inactive": 2}

clock = _time.perf_counter_ns  # the moments' clock (a test replaces it)
# The switches, set in this namespace by the library before this file runs (insight.cpp):
# MEMGUARD_STEPS and MEMGUARD_EXPLAIN_OOM.
STEPS = globals().get("STEPS", 1)
EXPLAIN_OOM = globals().get("EXPLAIN_OOM", 1)
OOM_MOMENT_LIMIT_NS = 5_000_000_000  # an OOM moment stops collecting after this (its k says partial)


def device_of(t):
    """The CUDA device of tensor `t`, or None for a tensor memguard does not tag (not on a GPU).
    A seam: the CPU tests replace it to tag host tensors."""
    d = t.device
    return (d.index or 0) if d.type == "cuda" else None


class Budget:
    """Step moments may take at most `fraction` of the time since the first step began: a moment is
    taken when the time spent in step moments so far is at most `fraction` of the time elapsed since
    then, else skipped (its step's s record is still written). The first step's moment is always
    taken. So with 100 ms steps and a 3 ms moment, two steps of three get one at 1%, and a 50 ms
    moment (a gc scan for the modules) is followed by about fifty steps without one."""

    def __init__(self, fraction=0.01, now=None):
        self.fraction = fraction
        self.now = now or (lambda: clock())
        self.start = None
        self.spent = 0
        self.taken = 0
        self.skipped = 0

    def begin(self):
        if self.start is None:
            self.start = self.now()

    def allow(self):
        now = self.now()
        if self.start is None:
            self.start = now
        if self.taken == 0 or self.spent <= self.fraction * (now - self.start):
            return True
        self.skipped += 1
        return False

    def charge(self, ns):
        self.taken += 1
        self.spent += max(0, ns)


budget = Budget()
_warned = set()


def _warn_once(what, exc=None):
    """One warning per kind of failure, through memguard's logger; never raises."""
    try:
        if what in _warned:
            return
        _warned.add(what)
        _log(f"{what}: {type(exc).__name__}: {exc}" if exc is not None else what)
    except BaseException:
        pass


def _torch():
    return _sys.modules.get("torch")


# --- collecting tags ----------------------------------------------------------------------------

class Collector:
    """The tags of one moment: storages deduplicated by data pointer; where one storage is found in
    several categories the first in the Category order wins (a parameter saved for backward stays a
    parameter)."""

    def __init__(self, deadline=None):
        self.found = []  # (category, order, device, ptr, size, label)
        self.deadline = deadline
        self.complete = True

    def add(self, t, category, label=None):
        if t is None:
            return
        try:
            local = getattr(t, "_local_tensor", None)  # DTensor: this rank's shard
            if local is not None:
                t = local
            dev = device_of(t)
            if dev is None:
                return
            st = t.untyped_storage()
            ptr = st.data_ptr()
            if ptr:
                self.found.append((category, len(self.found), dev, ptr, st.nbytes(), label))
        except Exception:
            pass  # meta, fake or freed tensors

    def out_of_time(self):
        if self.deadline is not None and clock() > self.deadline:
            self.complete = False
            return True
        return False

    def tags(self):
        seen = set()
        out = []
        for category, _, dev, ptr, size, label in sorted(self.found):
            if ptr not in seen:
                seen.add(ptr)
                out.append((dev, ptr, size, category, label))
        return tuple(out)


_optimizers = _weakref.WeakSet()
_roots = []            # weak references to the root modules found by the last scan
_roots_stale = True    # a new optimizer was seen since the last scan


def _scan_modules():
    """The root nn.Modules alive now (a gc scan; filtered by type(), never isinstance, which may run a
    proxy's __class__)."""
    global _roots, _roots_stale
    torch = _torch()
    module_type = torch.nn.Module
    mods = [o for o in _gc.get_objects() if issubclass(type(o), module_type)]
    children = set()
    for m in mods:
        try:
            children.update(id(c) for c in m.children())
        except Exception:
            pass
    _roots = [_weakref.ref(m) for m in mods if id(m) not in children]
    _roots_stale = False


def _collect_model(c):
    """Parameters (named from the live modules, else by optimizer group), their gradients, the
    optimizers' state and the modules' buffers."""
    if _roots_stale:
        _scan_modules()
    torch = _torch()
    names = {}
    params = []
    buffers = []
    for ref in _roots:
        m = ref()
        if m is None:
            continue
        try:
            for name, p in m.named_parameters():
                if id(p) not in names:
                    names[id(p)] = name
                    params.append((p, name))
            buffers.extend((b, name) for name, b in m.named_buffers())
        except Exception:
            pass
    for opt in list(_optimizers):
        try:
            for gi, group in enumerate(opt.param_groups):
                for pi, p in enumerate(group["params"]):
                    if id(p) not in names:
                        names[id(p)] = f"param_groups[{gi}][{pi}]"
                        params.append((p, names[id(p)]))
        except Exception:
            pass
    for p, name in params:
        c.add(p, PARAMETER, name)
        grad = p.grad
        if grad is not None:
            c.add(grad, GRADIENT, name + ".grad")
    is_tensor = torch.is_tensor
    for opt in list(_optimizers):
        try:
            cls = type(opt).__name__
            for state in list(opt.state.values()):
                for key, v in state.items():
                    if is_tensor(v):
                        c.add(v, OPTIMIZER_STATE, f"{cls}.{key}")
        except Exception:
            pass
    for b, name in buffers:
        c.add(b, BUFFER, name)


_leaf_scan_ns = None  # what the last scan for gradients of non-parameters cost


def _leaf_scan_allowed():
    """A step moment also scans for gradients of tensors that are not parameters (a gc scan, the
    cost of which grows with the heap) when the budget has room for what the last scan cost."""
    if _leaf_scan_ns is None:
        return True
    elapsed = budget.now() - (budget.start or budget.now())
    return budget.spent + _leaf_scan_ns <= budget.fraction * elapsed


def _collect_leaf_grads(c):
    """Gradients of leaf tensors that are not parameters (a stale .grad, as on detached checkpoint
    inputs): a gc scan filtered by type(), never isinstance."""
    global _leaf_scan_ns
    t0 = clock()
    try:
        torch = _torch()
        tensor_type, param_type = torch.Tensor, torch.nn.Parameter
        for o in _gc.get_objects():
            tp = type(o)
            if issubclass(tp, tensor_type) and not issubclass(tp, param_type):
                try:
                    if o.is_leaf and o.grad is not None:
                        c.add(o.grad, NONPARAM_GRADIENT)
                except Exception:
                    pass
    finally:
        _leaf_scan_ns = clock() - t0


def _saved_names(node_type, cache={}):
    names = cache.get(node_type)
    if names is None:
        names = cache[node_type] = tuple(n for n in dir(node_type) if n.startswith("_raw_saved_"))
    return names


def _collect_graphs(c, roots):
    """Tensors saved for backward by the autograd graphs reachable from `roots` ((grad_fn, holder)
    pairs, the named holders first), read through `_raw_saved_*` (SavedTensor.data: the packed
    value, no unpack hook runs, so a checkpointed forward is never re-run). Where SavedTensor has
    no .data (older torch) nothing is read. A node reached from several roots is the first's:
    labels read "saved by MmBackward0 (kept by total_loss at train.py:57)"."""
    is_tensor = _torch().is_tensor
    # Node wrappers are made on access and die with their last reference: an id alone could come
    # back for another node and hide it, so the walk keeps every node it saw alive until it ends.
    seen = {}
    for root, holder in roots:
        suffix = f" (kept by {holder})" if holder else ""
        stack = [root]
        while stack:
            if c.out_of_time():
                return
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen[id(node)] = node
            label = f"saved by {type(node).__name__}{suffix}"
            try:
                for name in _saved_names(type(node)):
                    raw = getattr(node, name, None)
                    for r in raw if isinstance(raw, (list, tuple)) else (raw,):
                        data = getattr(r, "data", None)
                        if data is not None and is_tensor(data):
                            c.add(data, ACTIVATION, label)
            except Exception:
                pass  # freed by a backward already
            try:
                stack.extend(n for n, _ in node.next_functions if n is not None)
            except Exception:
                pass


def _holders(tensor_type):
    """id(tensor) -> "name at file:line" for the tensors with a grad_fn that a variable of a running
    frame holds (or an item of a list, tuple or dict one holds), on every thread: the outermost
    frame that holds a tensor names it (the loop's `total_loss`, not a callee's argument). memguard's
    own frames are skipped."""
    out = {}

    def note(t, name):
        if issubclass(type(t), tensor_type) and id(t) not in out:
            try:
                if t.grad_fn is not None:
                    out[id(t)] = name
            except Exception:
                pass

    own = globals()
    for top in list(_sys._current_frames().values()):
        chain = []
        f = top
        while f is not None:
            chain.append(f)
            f = f.f_back
        for f in reversed(chain):
            if f.f_globals is own:
                continue
            code = f.f_code
            where = f"{code.co_filename}:{f.f_lineno}"
            try:
                items = list(f.f_locals.items())
            except Exception:
                continue
            for name, v in items:
                tp = type(v)
                if tp is list or tp is tuple:
                    for i, x in enumerate(v[:10000]):
                        note(x, f"{name}[{i}] at {where}")
                elif tp is dict:
                    for k, x in list(v.items())[:10000]:
                        note(x, f"{name}[{k!r}] at {where}")
                else:
                    note(v, f"{name} at {where}")
    return out


def _collect_everything(c):
    """An OOM moment: the model's tensors, then every live tensor found by a gc scan: gradients of
    tensors that are not parameters, the saved tensors of their graphs, the rest as other tensors."""
    _collect_model(c)
    torch = _torch()
    tensor_type, param_type = torch.Tensor, torch.nn.Parameter
    tensors = [o for o in _gc.get_objects() if issubclass(type(o), tensor_type)]
    try:
        holders = _holders(tensor_type)
    except Exception:
        holders = {}
    named, unnamed = [], []
    for t in tensors:
        try:
            if t.is_leaf:
                if not issubclass(type(t), param_type) and t.grad is not None:
                    c.add(t.grad, NONPARAM_GRADIENT)
            elif t.grad_fn is not None:
                holder = holders.get(id(t))
                (named if holder else unnamed).append((t.grad_fn, holder))
        except Exception:
            pass
    _collect_graphs(c, named + unnamed)
    for t in tensors:
        c.add(t, OTHER_TENSOR)


# --- PyTorch's allocator -------------------------------------------------------------------------

def native_allocator(initialized=True):
    """True when PyTorch's own caching allocator serves this process's tensors (not memguard's, not
    cudaMallocAsync, not a pluggable one) and, with `initialized`, CUDA is initialized: its snapshot
    and OOM observer work. (torch.cuda._lazy_call's queued calls run before is_initialized() says
    True.)"""
    torch = _torch()
    try:
        return (not _allocator_mode() and (not initialized or torch.cuda.is_initialized())
                and torch.cuda.memory.get_allocator_backend() == "native")
    except Exception:
        return False


def allocator_blocks():
    """PyTorch's allocator blocks from torch.cuda.memory._snapshot() (without history: cheap), as
    _blocks tuples."""
    snap = _torch().cuda.memory._snapshot()
    out = []
    for seg in snap.get("segments", ()):
        dev = int(seg.get("device", 0))
        base = int(seg["address"])
        pool = seg.get("segment_pool_id")
        pool = "-" if not pool or tuple(pool) == (0, 0) else f"{pool[0]}.{pool[1]}"
        addr = base
        for b in seg.get("blocks", ()):
            size = int(b["size"])
            addr = int(b.get("address", addr))
            state = _BLOCK_STATES.get(b.get("state"), 2)
            requested = int(b.get("requested_size", size)) if state != 2 else 0
            out.append((dev, addr, size, requested, state, base, pool))
            addr += size
    return tuple(out)


# --- moments ---------------------------------------------------------------------------------------

_last_peak = 0


def _peak_raised():
    global _last_peak
    peak = _stats(-1)[1]
    raised = peak > _last_peak
    _last_peak = max(peak, _last_peak)
    return raised


def step_moment(reason=MOMENT_STEP):
    """Writes one moment of the model's tensors (and the allocator's blocks when the GPU peak rose).
    Returns the moment id (0: none written: no report yet)."""
    moment = _moment_begin(reason)
    if not moment:
        return 0
    c = Collector()
    blocks = ()
    complete = True
    try:
        _collect_model(c)
        if _leaf_scan_allowed():
            _collect_leaf_grads(c)
        if _peak_raised() and native_allocator():
            blocks = allocator_blocks()
    except Exception as e:
        complete = False
        _warn_once("memguard: a step moment stopped early", e)
    tensors = _tag(moment, c.tags())
    n_blocks = _blocks(moment, blocks) if blocks else 0
    _moment_end(moment, tensors, n_blocks, complete)
    return moment


def _on_step(source, name, opt=None):
    index = _step(source, name)
    _after_step(index)
    if not budget.allow():
        return
    t0 = clock()
    try:
        step_moment()
    finally:
        budget.charge(clock() - t0)


def api_step(name=""):
    """memguard.step(name): a step ended (source api)."""
    try:
        budget.begin()
        _on_step(SOURCE_API, str(name))
    except BaseException as e:
        _warn_once("memguard.step() failed", e)


# --- optimizer step hooks --------------------------------------------------------------------------

_tl = _threading.local()


def _step_frame():
    """The frame of PyTorch's step wrapper (Optimizer.profile_hook_step) that called the hook, or
    None (compiled code has none)."""
    f = _sys._getframe(2)
    for _ in range(8):
        if f is None:
            return None
        code = f.f_code
        if code.co_name == "wrapper" and code.co_filename.endswith("optimizer.py"):
            return f
        f = f.f_back
    return None


def _outer_alive(outer):
    """The outermost step's wrapper frame is still on this thread's stack (its step did not end by
    an exception, which skips the post hooks)."""
    if outer is None:
        return True
    f = _sys._getframe(1)
    while f is not None:
        if f is outer:
            return True
        f = f.f_back
    return False


def pre_hook_body(opt, args, kwargs):
    try:
        depth = getattr(_tl, "depth", 0)
        if depth and not _outer_alive(getattr(_tl, "outer", None)):
            depth = 0  # the previous step raised: its post hooks never ran
        if depth == 0:
            _tl.outer = _step_frame()
            budget.begin()
            if opt not in _optimizers:
                global _roots_stale
                _optimizers.add(opt)
                _roots_stale = True
        _tl.depth = depth + 1
    except BaseException as e:
        _warn_once("memguard's optimizer pre-step hook failed", e)


def post_hook_body(opt, args, kwargs):
    try:
        depth = getattr(_tl, "depth", 0)
        if depth <= 0:
            return
        _tl.depth = depth - 1
        if depth == 1:
            _tl.outer = None
            _on_step(SOURCE_OPTIMIZER, type(opt).__name__, opt)
    except BaseException as e:
        _warn_once("memguard's optimizer post-step hook failed", e)


_is_compiling = None  # torch.compiler.is_compiling once torch.compiler is loaded


def _pre_hook(opt, args, kwargs):
    # Until dynamo's disable wraps the bodies (on_import), a trace of opt.step() skips them: dynamo
    # folds is_compiling() to True, so nothing here is traced (no graph break, no warning).
    if _is_compiling is not None and _is_compiling():
        return None
    pre_hook_body(opt, args, kwargs)
    return None


def _post_hook(opt, args, kwargs):
    if _is_compiling is not None and _is_compiling():
        return None
    post_hook_body(opt, args, kwargs)
    return None


_handles = []
_disabled = False
_observer_queued = False


def _swap_in_disabled():
    """Once torch._dynamo is loaded: the registered hooks become torch._dynamo.disable(body), so a
    compiled function that calls opt.step() runs them eagerly (one graph break, no warning) and its
    steps are counted."""
    global _disabled
    dynamo = _sys.modules.get("torch._dynamo")
    disable = getattr(dynamo, "disable", None)
    if disable is None or getattr(_sys.modules.get("torch._dynamo.eval_frame"), "DisableContext", None) is None:
        return
    optim = _sys.modules["torch.optim.optimizer"]
    pre, post = disable(pre_hook_body), disable(post_hook_body)
    for handle, table, fn in zip(_handles, (optim._global_optimizer_pre_hooks, optim._global_optimizer_post_hooks),
                                 (pre, post)):
        if handle.id in table:
            table[handle.id] = fn
    _disabled = True


def _queue_observer():
    """Attaches the OOM observer once CUDA is initialized (attaching initializes CUDA, which a
    CPU-only process or a DataLoader worker must not do): torch.cuda._lazy_call runs it at once
    when CUDA is up, else at the end of torch.cuda's lazy initialization."""
    global _observer_queued
    torch = _torch()
    cuda = getattr(torch, "cuda", None)
    lazy = getattr(cuda, "_lazy_call", None)
    if lazy is None:
        return
    _observer_queued = True
    if not hasattr(torch._C, "_cuda_attach_out_of_memory_observer"):
        return  # a build without CUDA
    lazy(_attach_observer)


def _attach_observer():
    try:
        if not native_allocator(initialized=False):
            return  # memguard's allocator writes its own x; other backends refuse observers
        _torch()._C._cuda_attach_out_of_memory_observer(oom_observer)
    except BaseException as e:
        _warn_once("memguard cannot attach PyTorch's OOM observer", e)


def on_import():
    """From the audit hook's import events, while _want_imports(1)."""
    global _is_compiling
    try:
        if _is_compiling is None:
            _is_compiling = getattr(getattr(_torch(), "compiler", None), "is_compiling", None)
        if not _observer_queued:
            _queue_observer()
        if not _disabled:
            _swap_in_disabled()
        if _disabled and _observer_queued and _is_compiling is not None:
            _want_imports(0)
    except BaseException as e:
        _want_imports(0)
        _warn_once("memguard's torch side stopped following imports", e)


def install():
    """Registers the global optimizer step hooks (torch.optim.optimizer is loaded, torch may still
    be importing; not with MEMGUARD_STEPS=0) and asks for import events to finish the set-up."""
    global _disabled, _observer_queued
    try:
        if STEPS:
            optim = _sys.modules["torch.optim.optimizer"]
            _handles.append(optim.register_optimizer_step_pre_hook(_pre_hook))
            _handles.append(optim.register_optimizer_step_post_hook(_post_hook))
        else:
            _disabled = True  # no hooks to swap
        if not EXPLAIN_OOM:
            _observer_queued = True  # none to queue
        if RECOMPUTE:
            _install_recompute()
        _want_imports(1)
    except BaseException as e:
        _warn_once("memguard cannot register optimizer step hooks", e)


# --- out of memory ---------------------------------------------------------------------------------

def _device_figures(device):
    torch = _torch()
    total = allocated = reserved = None
    try:
        total = torch.cuda.get_device_properties(device).total_memory
    except Exception:
        pass
    try:
        stats = torch.cuda.memory_stats(device)
        allocated = stats.get("allocated_bytes.all.current")
        reserved = stats.get("reserved_bytes.all.current")
    except Exception:
        pass
    return total, allocated, reserved


def oom_moment(device, source, requested, rounded, limit, free, total, allocated, reserved, with_blocks,
               stack_id=-1, python_stack_id=-1):
    """Writes an OOM moment: h, g (every live tensor found), d (with_blocks), x, k; flushes; prints
    the stderr line. Returns the moment id (0 when memguard does not record)."""
    moment = _moment_begin(MOMENT_OOM)
    c = Collector(deadline=clock() + OOM_MOMENT_LIMIT_NS)
    tensors = n_blocks = 0
    complete = True
    try:
        _collect_everything(c)
    except Exception as e:
        complete = False
        _warn_once("memguard: an out-of-memory moment stopped early", e)
    complete = complete and c.complete
    if moment:
        tensors = _tag(moment, c.tags())
        if with_blocks:
            try:
                n_blocks = _blocks(moment, allocator_blocks())
            except Exception as e:
                complete = False
                _warn_once("memguard cannot read PyTorch's allocator snapshot", e)
    _oom_context(device, source, requested, rounded, limit, free, total, allocated, reserved, moment,
                 stack_id, python_stack_id)
    if moment:
        _moment_end(moment, tensors, n_blocks, complete)
    _oom_notice(device)
    return moment


def oom_observer(device, alloc, limit, device_free):
    """PyTorch's OOM observer: (device, the rounded request, the limit (the memory fraction's, or the
    device's total), the device's free bytes). Called on the allocating thread with the GIL held and
    the allocator's lock released, before PyTorch raises OutOfMemoryError. Never raises: an
    exception here would replace the user's OutOfMemoryError."""
    try:
        total, allocated, reserved = _device_figures(device)
        oom_moment(device, 0, None, alloc, limit, device_free, total, allocated, reserved,
                   native_allocator(initialized=False))
    except BaseException as e:
        _warn_once("memguard's OOM observer failed", e)


def allocator_oom(device, requested, rounded, limit, free, total, allocated, reserved, stack_id, python_stack_id):
    """Allocator mode (memguard is PyTorch's allocator): an OOM moment with tags and no d records,
    around the x with the request's stacks. True when the x was written."""
    if not EXPLAIN_OOM:
        return False  # the library writes the x by itself
    try:
        oom_moment(device, 2, requested, rounded, limit, free, total, allocated, reserved, False,
                   stack_id, python_stack_id)
        return True
    except BaseException as e:
        _warn_once("memguard's allocator-mode OOM moment failed", e)
        return False
