#include "allocmode/torch_memory_api.h"

#include <atomic>
#include <cstdio>
#include <set>
#include <string>

#include "allocmode/torch_bridge.h"
#include "allocmode/tracking_allocator.h"
#include "common/log.h"
#include "python/state.h"

namespace memguard::allocmode {

namespace {

using namespace python;  // the C API resolved at run time (capi.h) and its helpers (state.h)

PyObject* g_observers = nullptr;  // a list, kept for the life of the process (GIL-protected)
std::atomic<int> g_observer_count{0};

/// A Python float of `v`: float() of its shortest exact decimal text (the resolved C API has no
/// float constructor; %.17g round-trips every double).
PyObject* new_float(double v) {
    const CApi* a = capi();
    char text[40];
    std::snprintf(text, sizeof text, "%.17g", v);
    Ref builtins(a->PyImport_ImportModule("builtins"));
    Ref type(builtins ? a->PyObject_GetAttrString(builtins.get(), "float") : nullptr);
    Ref args(type ? a->PyTuple_New(1) : nullptr);
    PyObject* s = args ? a->PyUnicode_FromString(text) : nullptr;
    if (!s) return nullptr;
    a->PyTuple_SetItem(args.get(), 0, s);  // steals
    return a->PyObject_CallObject(type.get(), args.get());
}

// --- get_per_process_memory_fraction --------------------------------------------------------------

/// torch._C._cuda_getMemoryFraction(device). `self` is PyTorch's function, called for a device
/// memguard does not know so that PyTorch's own error reaches the program.
PyObject* get_memory_fraction(PyObject* self, PyObject* args) {
    const int device = python_device_arg(args);
    alloc::CachingAllocator* a = existing_allocator();
    if (!a || device < 0 || device >= a->device_count()) return capi()->PyObject_CallObject(self, args);
    return new_float(a->memory_fraction(device));
}
PyMethodDef g_get_fraction_def{
    "_cuda_getMemoryFraction", get_memory_fraction, METH_VARARGS,
    "memguard (MEMGUARD_ALLOCATOR=memguard): the memory fraction of a device, as PyTorch's allocator answers it"};

// --- OOM observers ---------------------------------------------------------------------------------

constexpr int kMethO = 0x0008;  // METH_O: one positional argument, checked by Python

PyObject* attach_observer(PyObject* /*self*/, PyObject* observer) {
    const CApi* a = capi();
    if (!g_observers) {
        Ref builtins(a->PyImport_ImportModule("builtins"));
        Ref list(builtins ? a->PyObject_GetAttrString(builtins.get(), "list") : nullptr);
        g_observers = list ? a->PyObject_CallObject(list.get(), nullptr) : nullptr;
        if (!g_observers) return nullptr;
    }
    if (a->PyList_Append(g_observers, observer) != 0) return nullptr;
    g_observer_count.fetch_add(1, std::memory_order_release);
    return new_none();
}
PyMethodDef g_attach_def{"_cuda_attach_out_of_memory_observer", attach_observer, kMethO,
                         "memguard (MEMGUARD_ALLOCATOR=memguard): calls the observer on an out-of-memory error as "
                         "observer(device, alloc_size, device_total_or_limit, device_free)"};

// --- _set_allocator_settings -----------------------------------------------------------------------

/// PyTorch's own function (`self`) first, then memguard's allocator takes the settings it has.
PyObject* set_allocator_settings(PyObject* self, PyObject* args) {
    const CApi* a = capi();
    Ref result(a->PyObject_CallObject(self, args));
    if (!result) return nullptr;  // PyTorch refused the text: its error stands
    const char* text = a->PyTuple_Size(args) >= 1 ? a->PyUnicode_AsUTF8(a->PyTuple_GetItem(args, 0)) : nullptr;
    if (!text) {
        a->PyErr_Clear();
        return result.release();
    }
    static std::set<std::string>* said = new std::set<std::string>;  // GIL-protected, never destroyed
    for (std::string note : apply_torch_settings(text)) {
        // The notes name the environment variable; here the text came from the call.
        static const std::string kEnv = "PYTORCH_CUDA_ALLOC_CONF ";
        if (note.compare(0, kEnv.size(), kEnv) == 0) note.erase(0, kEnv.size());
        if (said->insert(note).second) MG_LOG_WARN("torch.cuda.memory._set_allocator_settings: {}", note);
    }
    return result.release();
}
PyMethodDef g_settings_def{"_set_allocator_settings", set_allocator_settings, METH_VARARGS,
                           "memguard (MEMGUARD_ALLOCATOR=memguard): PyTorch's allocator settings, applied to "
                           "memguard's allocator where it has them"};

/// torch_c.<name> = a function of `def` whose self is the original; false when this PyTorch has
/// no such entry point.
bool replace_with(PyObject* torch_c, const char* name, PyMethodDef* def, PyObject* self_override = nullptr) {
    const CApi* a = capi();
    Ref original(a->PyObject_GetAttrString(torch_c, name));
    if (!original) {
        a->PyErr_Clear();
        return false;
    }
    Ref fn(a->PyCFunction_NewEx(def, self_override ? self_override : original.get(), nullptr));
    if (!fn || a->PyObject_SetAttrString(torch_c, name, fn.get()) != 0) {
        MG_LOG_WARN("allocator mode: cannot replace torch._C.{}: {}", name, python_error_text());
        return false;
    }
    return true;
}

}  // namespace

void patch_memory_api(PyObject* torch_c) {
    replace_with(torch_c, "_cuda_getMemoryFraction", &g_get_fraction_def);
    replace_with(torch_c, "_cuda_attach_out_of_memory_observer", &g_attach_def);
    // 2.9 and later route _set_allocator_settings through the accelerator-generic entry point;
    // earlier releases through the CUDA one. Both are replaced where they exist.
    replace_with(torch_c, "_accelerator_setAllocatorSettings", &g_settings_def);
    replace_with(torch_c, "_cuda_cudaCachingAllocator_set_allocator_settings", &g_settings_def);
}

bool has_oom_observers() noexcept { return g_observer_count.load(std::memory_order_acquire) > 0; }

void call_oom_observers(int device, size_t alloc_size, size_t limit_or_total, size_t device_free) {
    const CApi* a = capi();
    if (!g_observers) return;
    const long long values[4] = {device, static_cast<long long>(alloc_size), static_cast<long long>(limit_or_total),
                                 static_cast<long long>(device_free)};
    // Observers attached by an observer run from the next OOM on.
    const ptrdiff_t n = a->PyList_Size(g_observers);
    for (ptrdiff_t i = 0; i < n; ++i) {
        PyObject* observer = a->PyList_GetItem(g_observers, i);  // borrowed
        Ref args(a->PyTuple_New(4));
        if (!observer || !args) break;
        bool ok = true;
        for (int k = 0; k < 4 && ok; ++k) {
            PyObject* v = a->PyLong_FromLongLong(values[k]);
            ok = v != nullptr;
            if (ok) a->PyTuple_SetItem(args.get(), k, v);
        }
        if (!ok) break;
        a->Py_IncRef(observer);  // the list may change while it runs
        Ref hold(observer);
        Ref r(a->PyObject_CallObject(observer, args.get()));
        if (!r) MG_LOG_WARN("an out-of-memory observer raised: {}", python_error_text());
    }
    if (a->PyErr_Occurred()) a->PyErr_Clear();
}

}  // namespace memguard::allocmode
