#include "python/dynamo.h"

#include <string>

#include "common/log.h"
#include "python/capi.h"
#include "python/compile_marks.h"
#include "python/state.h"

namespace memguard::python {
namespace {

// Strong references to memguard's callbacks, kept for the life of the process; GIL-protected.
PyObject* g_start_callback = nullptr;
PyObject* g_end_callback = nullptr;
bool g_registered = false;

/// The compile id of dynamo's callback arguments: torch >= 2.8 passes CallbackArgs; older, nothing.
std::string compile_id_of(PyObject* args) {
    const CApi* a = capi();
    if (a->PyTuple_Size(args) < 1) return "?";
    Ref id(a->PyObject_GetAttrString(a->PyTuple_GetItem(args, 0), "compile_id"));
    if (!id) {
        a->PyErr_Clear();
        return "?";
    }
    Ref str(a->PyObject_Str(id.get()));
    const char* s = str ? a->PyUnicode_AsUTF8(str.get()) : nullptr;
    return s ? s : "?";
}

/// dynamo's end-of-compile callback.
PyObject* end_callback(PyObject*, PyObject* args) {
    if (finalizing()) return new_none();
    ErrorGuard keep_error;
    compile_ended(compile_id_of(args));
    return new_none();
}
PyMethodDef g_end_callback_def{"memguard_compile_end", end_callback, METH_VARARGS, nullptr};

/// dynamo's start-of-compile callback. Runs under the same lock as the end callback.
PyObject* start_callback(PyObject*, PyObject*) {
    if (!finalizing()) {
        ErrorGuard keep_error;
        compile_started();
    }
    return new_none();
}
PyMethodDef g_start_callback_def{"memguard_compile_start", start_callback, METH_VARARGS, nullptr};

void register_one(PyObject* handler, const char* method, PyObject* callback) {
    const CApi* a = capi();
    Ref reg(a->PyObject_GetAttrString(handler, method));
    Ref args(a->PyTuple_New(1));
    if (!reg || !args || !callback) {
        a->PyErr_Clear();
        return;
    }
    a->Py_IncRef(callback);
    a->PyTuple_SetItem(args.get(), 0, callback);  // steals the reference
    Ref r(a->PyObject_CallObject(reg.get(), args.get()));
    if (!r) a->PyErr_Clear();
}

void register_callbacks(PyObject* handler) {
    register_one(handler, "register_start_callback", g_start_callback);
    register_one(handler, "register_end_callback", g_end_callback);
}

/// Replaces callback_handler.clear (torch._dynamo.reset() calls it): clears, then registers
/// memguard's callbacks again. `self` is (original clear, handler).
PyObject* clear_wrapper(PyObject* self, PyObject* args) {
    const CApi* a = capi();
    PyObject* original = a->PyTuple_GetItem(self, 0);
    PyObject* handler = a->PyTuple_GetItem(self, 1);
    PyObject* r = a->PyObject_CallObject(original, args);
    if (r && !finalizing()) {
        ErrorGuard keep_error;
        register_callbacks(handler);
    }
    return r;
}
PyMethodDef g_clear_def{"clear", clear_wrapper, METH_VARARGS, "callback_handler.clear, wrapped by memguard"};

}  // namespace

bool dynamo_registered() { return g_registered; }

void try_register_dynamo() {
    const CApi* a = capi();
    Ref handler(module_attr("torch._dynamo.callback", "callback_handler"));
    if (!handler) {
        a->PyErr_Clear();
        return;
    }
    learn_dynamo_queries();
    g_end_callback = make_function(&g_end_callback_def, nullptr);
    g_start_callback = make_function(&g_start_callback_def, nullptr);
    Ref original_clear(a->PyObject_GetAttrString(handler.get(), "clear"));
    Ref pair(a->PyTuple_New(2));
    if (!g_end_callback || !original_clear || !pair) {
        a->PyErr_Clear();
        return;
    }
    a->PyTuple_SetItem(pair.get(), 0, original_clear.release());
    a->Py_IncRef(handler.get());
    a->PyTuple_SetItem(pair.get(), 1, handler.get());
    Ref wrapped(make_function(&g_clear_def, pair.get()));
    if (!wrapped || a->PyObject_SetAttrString(handler.get(), "clear", wrapped.get()) != 0) {
        a->PyErr_Clear();
        return;
    }
    register_callbacks(handler.get());
    g_registered = true;
    MG_LOG_DEBUG("registered with torch._dynamo's compile callbacks");
}

}  // namespace memguard::python
