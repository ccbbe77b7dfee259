#include "python/module.h"

#include <string>

#include "common/log.h"
#include "python/capi.h"
#include "track/recorder.h"

namespace memguard::python {
namespace {

using track::PhaseSource;
using track::Recorder;

// --- the native functions (GIL held; they take only the recorder's short leaf locks) -------------

PyObject* new_long(long long v) { return capi()->PyLong_FromLongLong(v); }

PyObject* none() {
    capi()->Py_IncRef(capi()->none);
    return capi()->none;
}

/// The first argument as UTF-8, or nullptr with a Python exception set.
const char* str_arg(PyObject* args) {
    const CApi* a = capi();
    // Anything but one str (None stands in for a wrong argument count) raises TypeError.
    PyObject* arg = a->PyTuple_Size(args) == 1 ? a->PyTuple_GetItem(args, 0) : a->none;
    return a->PyUnicode_AsUTF8(arg);
}

PyObject* native_begin(PyObject*, PyObject* args) {
    const char* name = str_arg(args);
    if (!name) return nullptr;
    return new_long(static_cast<long long>(Recorder::instance().record_phase_begin(PhaseSource::Api, name)));
}

PyObject* native_end(PyObject*, PyObject* args) {
    const CApi* a = capi();
    if (a->PyTuple_Size(args) != 1) return none();
    long long id = a->PyLong_AsLongLong(a->PyTuple_GetItem(args, 0));
    if (id == -1 && a->PyErr_Occurred()) return nullptr;
    if (id > 0) Recorder::instance().record_phase_end(static_cast<uint64_t>(id));
    return none();
}

PyObject* native_mark(PyObject*, PyObject* args) {
    const char* name = str_arg(args);
    if (!name) return nullptr;
    Recorder::instance().record_mark(PhaseSource::Api, name);
    return none();
}

PyObject* native_active(PyObject*, PyObject*) { return new_long(Recorder::instance().active() ? 1 : 0); }

PyObject* native_report_path(PyObject*, PyObject*) {
    return capi()->PyUnicode_FromString(Recorder::instance().report_path().c_str());
}

PyObject* native_flush(PyObject*, PyObject*) {
    Recorder& r = Recorder::instance();
    if (r.report_path().empty()) return new_long(-1);
    r.flush();
    return new_long(0);
}

PyMethodDef g_natives[] = {
    {"_begin", native_begin, METH_VARARGS, nullptr},
    {"_end", native_end, METH_VARARGS, nullptr},
    {"_mark", native_mark, METH_VARARGS, nullptr},
    {"_active", native_active, METH_NOARGS, nullptr},
    {"_report_path", native_report_path, METH_NOARGS, nullptr},
    {"_flush", native_flush, METH_NOARGS, nullptr},
};

// The module's Python part, run in the module's namespace over the natives above.
constexpr const char kModuleSource[] = R"PY(
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
)PY";

// The import hook, run in a private namespace that holds `_make` (creates the module above).
// `_memguard` is always memguard's. `memguard` is memguard's unless another finder on sys.meta_path
// (the path finder: sys.path; an editable install's finder) has a module or regular package of that
// name (that one is imported, as without memguard); a bare directory named memguard (a namespace
// package, say the source checkout) does not shadow it.
constexpr const char kFinderSource[] = R"PY(
import sys


class MemguardFinder:
    """Imports memguard's in-process module (libmemguard.so is preloaded)."""
    names = ("memguard", "_memguard")
    module = None

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if path is not None or fullname not in cls.names:
            return None
        from importlib.machinery import ModuleSpec
        if fullname == "memguard":
            for finder in sys.meta_path:  # the path finder, and any other (say an editable install's)
                find = getattr(finder, "find_spec", None) if finder is not cls else None
                try:
                    real = find(fullname, None) if find else None
                except Exception:
                    continue
                if real is not None and real.loader is not None and real.origin not in (None, "namespace"):
                    return None
        return ModuleSpec(fullname, cls, origin="libmemguard.so")

    @classmethod
    def create_module(cls, spec):
        if cls.module is None:
            cls.module = _make()
        return cls.module

    @staticmethod
    def exec_module(module):
        pass


_at = next((i for i, f in enumerate(sys.meta_path) if getattr(f, "__name__", "") == "PathFinder"), len(sys.meta_path))
sys.meta_path.insert(_at, MemguardFinder)
)PY";

/// exec(source, namespace.__dict__). False with the error cleared on failure.
bool run_source(PyObject* ns, const char* source) {
    const CApi* a = capi();
    Ref builtins(a->PyImport_ImportModule("builtins"));
    Ref exec(builtins ? a->PyObject_GetAttrString(builtins.get(), "exec") : nullptr);
    Ref dict(a->PyObject_GetAttrString(ns, "__dict__"));
    Ref src(a->PyUnicode_FromString(source));
    Ref args(a->PyTuple_New(2));
    if (!exec || !dict || !src || !args) return false;
    a->PyTuple_SetItem(args.get(), 0, src.release());
    a->PyTuple_SetItem(args.get(), 1, dict.release());
    Ref r(a->PyObject_CallObject(exec.get(), args.get()));
    return static_cast<bool>(r);
}

/// A new module object: type(sys)(name).
PyObject* new_module(const char* name) {
    const CApi* a = capi();
    Ref sys(a->PyImport_ImportModule("sys"));
    Ref type(sys ? a->PyObject_GetAttrString(sys.get(), "__class__") : nullptr);
    Ref n(a->PyUnicode_FromString(name));
    Ref args(a->PyTuple_New(1));
    if (!type || !n || !args) return nullptr;
    a->PyTuple_SetItem(args.get(), 0, n.release());
    return a->PyObject_CallObject(type.get(), args.get());
}

/// `_make()`: builds the memguard module (once per import of it; the finder caches it).
PyObject* make_module(PyObject*, PyObject*) {
    const CApi* a = capi();
    Ref mod(new_module("memguard"));
    if (!mod) return nullptr;
    for (PyMethodDef& def : g_natives) {
        Ref fn(a->PyCFunction_NewEx(&def, nullptr, nullptr));
        if (!fn || a->PyObject_SetAttrString(mod.get(), def.ml_name, fn.get()) != 0) return nullptr;
    }
    if (!run_source(mod.get(), kModuleSource)) return nullptr;
    return mod.release();
}
PyMethodDef g_make_def{"_make", make_module, METH_NOARGS, nullptr};

}  // namespace

void install_module() {
    const CApi* a = capi();
    if (!a->PyLong_FromLongLong) {
        MG_LOG_INFO("this Python lacks PyLong_FromLongLong; the memguard module is not available");
        return;
    }
    ErrorGuard keep_error;
    Ref ns(new_module("_memguard_import_hook"));
    Ref make(ns ? a->PyCFunction_NewEx(&g_make_def, nullptr, nullptr) : nullptr);
    if (!make || a->PyObject_SetAttrString(ns.get(), "_make", make.get()) != 0 || !run_source(ns.get(), kFinderSource)) {
        MG_LOG_WARN("cannot install the memguard Python module; `import memguard` is unavailable");
        return;
    }
    MG_LOG_DEBUG("the memguard Python module is importable");
}

}  // namespace memguard::python
