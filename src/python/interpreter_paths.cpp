#include "python/interpreter_paths.h"

#include "common/log.h"
#include "format/vocabulary.h"
#include "python/capi.h"
#include "python/embedded_interpreter_paths_py.h"
#include "python/module.h"
#include "python/state.h"
#include "track/recorder.h"

namespace memguard::python {
namespace {

PyObject* g_namespace = nullptr;  // interpreter_paths.py's namespace, kept for record_torch; GIL-protected
bool g_torch_done = false;        // torch's paths are written (or cannot be)
bool g_running = false;           // a call into the namespace is under way: imports it makes are not torch's

/// _record(kind, path): one e record. A kind the table does not know is ignored.
PyObject* native_record(PyObject*, PyObject* args) {
    const CApi* a = capi();
    if (a->PyTuple_Size(args) != 2) return new_none();
    const char* kind = a->PyUnicode_AsUTF8(a->PyTuple_GetItem(args, 0));
    const char* path = kind ? a->PyUnicode_AsUTF8(a->PyTuple_GetItem(args, 1)) : nullptr;
    format::PathKind k;
    if (path && format::kPathKindNames.parse(kind, &k)) recorder().record_python_path(k, path);
    a->PyErr_Clear();
    return new_none();
}
PyMethodDef g_record_def{"_record", native_record, METH_VARARGS, nullptr};

/// Calls the namespace's function `name` with `arg` (or none); errors cleared.
void call(const char* name, PyObject* arg) {
    const CApi* a = capi();
    Ref fn(g_namespace ? a->PyObject_GetAttrString(g_namespace, name) : nullptr);
    Ref args(a->PyTuple_New(arg ? 1 : 0));
    if (fn && args) {
        if (arg) {
            a->Py_IncRef(arg);
            a->PyTuple_SetItem(args.get(), 0, arg);
        }
        g_running = true;
        Ref r(a->PyObject_CallObject(fn.get(), args.get()));
        g_running = false;
    }
    a->PyErr_Clear();
}

}  // namespace

void record_start_paths() {
    const CApi* a = capi();
    ErrorGuard keep_error;
    Ref ns(new_module("_memguard_interpreter_paths"));
    Ref record(ns ? a->PyCFunction_NewEx(&g_record_def, nullptr, nullptr) : nullptr);
    if (!record || a->PyObject_SetAttrString(ns.get(), "_record", record.get()) != 0 ||
        !run_source(ns.get(), embedded::kInterpreterPathsPy)) {
        a->PyErr_Clear();
        g_torch_done = true;
        MG_LOG_DEBUG("cannot record the interpreter's paths; the report tells user code by path shapes");
        return;
    }
    g_namespace = ns.release();
    call("record_start", nullptr);
}

void record_torch_paths_if_imported() {
    if (g_torch_done || g_running || g_namespace == nullptr) return;
    const CApi* a = capi();
    ErrorGuard keep_error;
    Ref name(a->PyUnicode_FromString("torch"));
    Ref torch(name ? a->PyImport_GetModule(name.get()) : nullptr);
    if (!torch) {
        a->PyErr_Clear();
        return;
    }
    // torch is in sys.modules from the start of its import, its __path__ already set.
    g_torch_done = true;
    call("record_torch", torch.get());
}

}  // namespace memguard::python
