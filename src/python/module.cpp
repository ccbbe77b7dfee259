#include "python/module.h"

#include <string>

#include "common/log.h"
#include "python/args.h"
#include "python/capi.h"
#include "python/embedded_memguard_finder_py.h"
#include "python/embedded_memguard_py.h"
#include "python/insight.h"
#include "python/state.h"
#include "track/recorder.h"

namespace memguard::python {
namespace {

using track::PhaseSource;

// --- the native functions (GIL held; they take only the recorder's short leaf locks) -------------

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
    return new_long(static_cast<long long>(recorder().record_phase_begin(PhaseSource::Api, name)));
}

PyObject* native_end(PyObject*, PyObject* args) {
    const CApi* a = capi();
    if (a->PyTuple_Size(args) != 1) return new_none();
    long long id = a->PyLong_AsLongLong(a->PyTuple_GetItem(args, 0));
    if (id == -1 && a->PyErr_Occurred()) return nullptr;
    if (id > 0) recorder().record_phase_end(static_cast<uint64_t>(id));
    return new_none();
}

PyObject* native_mark(PyObject*, PyObject* args) {
    const char* name = str_arg(args);
    if (!name) return nullptr;
    recorder().record_mark(PhaseSource::Api, name);
    return new_none();
}

PyObject* native_active(PyObject*, PyObject*) { return new_long(recorder().active() ? 1 : 0); }

PyObject* native_report_path(PyObject*, PyObject*) {
    return capi()->PyUnicode_FromString(recorder().report_path().c_str());
}

PyObject* native_flush(PyObject*, PyObject*) {
    track::Recorder& r = recorder();
    if (r.report_path().empty()) return new_long(-1);
    r.flush();
    return new_long(0);
}

/// The device argument (one int; memguard.py passes -1 for every device); -2 with a Python
/// exception set when it is not an int.
long long device_arg(PyObject* args) {
    const CApi* a = capi();
    // A wrong argument count reads None, which raises TypeError.
    PyObject* arg = a->PyTuple_Size(args) == 1 ? a->PyTuple_GetItem(args, 0) : a->none;
    long long device = a->PyLong_AsLongLong(arg);
    if (device == -1 && a->PyErr_Occurred()) return -2;
    return device < 0 ? -1 : device;
}

/// _stats(device) -> (gpu_live, gpu_peak, tensor_live, tensor_peak, gc_collections,
/// gc_freeing_collections, gc_cuda_bytes_freed); the tensor figures are -1 outside allocator mode.
PyObject* native_stats(PyObject*, PyObject* args) {
    const CApi* a = capi();
    long long device = device_arg(args);
    if (device == -2) return nullptr;
    const track::Recorder::Stats s = recorder().stats(static_cast<int>(device));
    const long long values[] = {static_cast<long long>(s.gpu_live),
                                static_cast<long long>(s.gpu_peak),
                                s.tensors ? static_cast<long long>(s.tensor_live) : -1,
                                s.tensors ? static_cast<long long>(s.tensor_peak) : -1,
                                static_cast<long long>(s.gc_collections),
                                static_cast<long long>(s.gc_freeing_collections),
                                static_cast<long long>(s.gc_cuda_bytes_freed)};
    constexpr long long kCount = sizeof values / sizeof values[0];
    Ref tuple(a->PyTuple_New(kCount));
    if (!tuple) return nullptr;
    for (long long i = 0; i < kCount; ++i) {
        PyObject* v = new_long(values[i]);
        if (!v) return nullptr;
        a->PyTuple_SetItem(tuple.get(), i, v);  // steals the reference
    }
    return tuple.release();
}

PyObject* native_reset_peak(PyObject*, PyObject* args) {
    long long device = device_arg(args);
    if (device == -2) return nullptr;
    if (recorder().active()) recorder().reset_peak(static_cast<int>(device));
    return new_none();
}

PyMethodDef g_natives[] = {
    {"_stats", native_stats, METH_VARARGS, nullptr},
    {"_reset_peak", native_reset_peak, METH_VARARGS, nullptr},
    {"_begin", native_begin, METH_VARARGS, nullptr},
    {"_end", native_end, METH_VARARGS, nullptr},
    {"_mark", native_mark, METH_VARARGS, nullptr},
    {"_active", native_active, METH_NOARGS, nullptr},
    {"_report_path", native_report_path, METH_NOARGS, nullptr},
    {"_flush", native_flush, METH_NOARGS, nullptr},
};

// The module's Python part (memguard.py), run in the module's namespace over the natives above,
// and the import hook (memguard_finder.py), run in a private namespace that holds `_make`; both
// embedded at build time (embed_text.cmake).
using embedded::kMemguardFinderPy;
using embedded::kMemguardPy;

/// `_make()`: builds the memguard module (once per import of it; the finder caches it).
PyObject* make_module(PyObject*, PyObject*) {
    Ref mod(new_module("memguard"));
    if (!mod) return nullptr;
    if (!add_natives(mod.get()) || !run_source(mod.get(), kMemguardPy)) return nullptr;
    return mod.release();
}
PyMethodDef g_make_def{"_make", make_module, METH_NOARGS, nullptr};

}  // namespace

bool run_source(PyObject* ns, const char* source) {
    const CApi* a = capi();
    Ref builtins(a->PyImport_ImportModule("builtins"));
    Ref compile(builtins ? a->PyObject_GetAttrString(builtins.get(), "compile") : nullptr);
    Ref exec(builtins ? a->PyObject_GetAttrString(builtins.get(), "exec") : nullptr);
    Ref dict(a->PyObject_GetAttrString(ns, "__dict__"));
    // compile(source, "<memguard>", "exec"): memguard's own frames carry that file name, which the
    // CLI tells from the user's code (report/user_frame.h).
    Ref cargs(a->PyTuple_New(3));
    Ref src(a->PyUnicode_FromString(source));
    Ref name(a->PyUnicode_FromString("<memguard>"));
    Ref mode(a->PyUnicode_FromString("exec"));
    if (!compile || !exec || !dict || !cargs || !src || !name || !mode) return false;
    a->PyTuple_SetItem(cargs.get(), 0, src.release());
    a->PyTuple_SetItem(cargs.get(), 1, name.release());
    a->PyTuple_SetItem(cargs.get(), 2, mode.release());
    Ref code(a->PyObject_CallObject(compile.get(), cargs.get()));
    Ref args(a->PyTuple_New(2));
    if (!code || !args) return false;
    a->PyTuple_SetItem(args.get(), 0, code.release());
    a->PyTuple_SetItem(args.get(), 1, dict.release());
    Ref r(a->PyObject_CallObject(exec.get(), args.get()));
    return static_cast<bool>(r);
}

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

bool add_methods(PyObject* mod, PyMethodDef* defs, size_t count) {
    const CApi* a = capi();
    for (size_t i = 0; i < count; ++i) {
        Ref fn(a->PyCFunction_NewEx(&defs[i], nullptr, nullptr));
        if (!fn || a->PyObject_SetAttrString(mod, defs[i].ml_name, fn.get()) != 0) return false;
    }
    return true;
}

bool add_natives(PyObject* mod) {
    return add_methods(mod, g_natives, sizeof g_natives / sizeof g_natives[0]) && add_insight_natives(mod);
}

void install_module() {
    const CApi* a = capi();
    if (!a->PyLong_FromLongLong) {
        MG_LOG_INFO("this Python lacks PyLong_FromLongLong; the memguard module is not available");
        return;
    }
    ErrorGuard keep_error;
    Ref ns(new_module("_memguard_import_hook"));
    Ref make(ns ? a->PyCFunction_NewEx(&g_make_def, nullptr, nullptr) : nullptr);
    if (!make || a->PyObject_SetAttrString(ns.get(), "_make", make.get()) != 0 ||
        !run_source(ns.get(), kMemguardFinderPy)) {
        MG_LOG_WARN("cannot install the memguard Python module; `import memguard` is unavailable");
        return;
    }
    MG_LOG_DEBUG("the memguard Python module is importable");
}

}  // namespace memguard::python
