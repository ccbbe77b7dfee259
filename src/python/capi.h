// The part of CPython's C API that memguard uses, resolved at run time with dlsym(RTLD_DEFAULT).
// memguard never links libpython: the interpreter is either a static binary that exports its
// symbols or an executable that links libpython; in any other process the table stays empty and
// the Python hook does nothing. Only functions and a few data symbols are used, never struct
// layouts, so one build serves CPython 3.10 to 3.13.
#pragma once

#include <cstddef>

namespace memguard::python {

struct PyObject;  // opaque
struct PyFrameObject;
struct PyCodeObject;

using PyCFunction = PyObject* (*)(PyObject* self, PyObject* args);
struct PyMethodDef {  // stable ABI layout
    const char* ml_name;
    PyCFunction ml_meth;
    int ml_flags;
    const char* ml_doc;
};
constexpr int METH_VARARGS = 0x1;
constexpr int METH_KEYWORDS = 0x2;
constexpr int METH_NOARGS = 0x4;
constexpr int METH_O = 0x8;

using Py_tracefunc = int (*)(PyObject* obj, PyFrameObject* frame, int what, PyObject* arg);
constexpr int PyTrace_CALL = 0;
constexpr int PyTrace_RETURN = 3;
using Py_AuditHookFunction = int (*)(const char* event, PyObject* args, void* user_data);

struct CApi {
    int minor = 0;  // 3.<minor>

    int (*Py_IsInitialized)() = nullptr;
    int (*Py_IsFinalizing)() = nullptr;  // Py_IsFinalizing (3.13) or _Py_IsFinalizing
    const char* (*Py_GetVersion)() = nullptr;
    int (*PyGILState_Check)() = nullptr;
    int (*PySys_AddAuditHook)(Py_AuditHookFunction, void*) = nullptr;
    void (*PyEval_SetProfile)(Py_tracefunc, PyObject*) = nullptr;
    PyFrameObject* (*PyEval_GetFrame)() = nullptr;
    PyCodeObject* (*PyFrame_GetCode)(PyFrameObject*) = nullptr;
    PyFrameObject* (*PyFrame_GetBack)(PyFrameObject*) = nullptr;
    int (*PyFrame_GetLineNumber)(PyFrameObject*) = nullptr;
    // Optional (3.11+): how a frame left, where the interpreter does not say (hook.cpp).
    int (*PyFrame_GetLasti)(PyFrameObject*) = nullptr;
    PyObject* (*PyCode_GetCode)(PyCodeObject*) = nullptr;
    char* (*PyBytes_AsString)(PyObject*) = nullptr;
    ptrdiff_t (*PyBytes_Size)(PyObject*) = nullptr;
    PyObject* (*PyImport_GetModule)(PyObject*) = nullptr;
    PyObject* (*PyImport_ImportModule)(const char*) = nullptr;
    PyObject* (*PyObject_GetAttrString)(PyObject*, const char*) = nullptr;
    int (*PyObject_SetAttrString)(PyObject*, const char*, PyObject*) = nullptr;
    PyObject* (*PyObject_Call)(PyObject*, PyObject*, PyObject*) = nullptr;
    PyObject* (*PyObject_CallObject)(PyObject*, PyObject*) = nullptr;
    int (*PyObject_IsTrue)(PyObject*) = nullptr;
    PyObject* (*PyObject_Str)(PyObject*) = nullptr;
    PyObject* (*PyCFunction_NewEx)(PyMethodDef*, PyObject*, PyObject*) = nullptr;
    const char* (*PyUnicode_AsUTF8)(PyObject*) = nullptr;
    PyObject* (*PyUnicode_FromString)(const char*) = nullptr;
    long (*PyLong_AsLong)(PyObject*) = nullptr;
    long long (*PyLong_AsLongLong)(PyObject*) = nullptr;
    PyObject* (*PyLong_FromLongLong)(long long) = nullptr;  // optional (the memguard module)
    // Optional (allocator mode, python/allocator_mode.cpp).
    PyObject* (*PyLong_FromUnsignedLongLong)(unsigned long long) = nullptr;
    PyObject* (*PyDict_New)() = nullptr;
    int (*PyDict_SetItemString)(PyObject*, const char*, PyObject*) = nullptr;
    void* (*PyGILState_GetThisThreadState)() = nullptr;
    int (*PyGILState_Ensure)() = nullptr;  // PyGILState_STATE is an enum (int-sized)
    void (*PyGILState_Release)(int) = nullptr;
    // Optional (explained collections, python/cycles.cpp): re-tracking saved garbage young.
    ptrdiff_t (*PyList_Size)(PyObject*) = nullptr;
    PyObject* (*PyList_GetItem)(PyObject*, ptrdiff_t) = nullptr;
    void (*PyObject_GC_Track)(void*) = nullptr;
    void (*PyObject_GC_UnTrack)(void*) = nullptr;
    int (*PyObject_GC_IsTracked)(PyObject*) = nullptr;
    PyObject* (*PyDict_GetItemString)(PyObject*, const char*) = nullptr;
    ptrdiff_t (*PyTuple_Size)(PyObject*) = nullptr;
    PyObject* (*PyTuple_GetItem)(PyObject*, ptrdiff_t) = nullptr;
    PyObject* (*PyTuple_New)(ptrdiff_t) = nullptr;
    int (*PyTuple_SetItem)(PyObject*, ptrdiff_t, PyObject*) = nullptr;
    int (*PyList_Append)(PyObject*, PyObject*) = nullptr;
    void (*PyErr_Fetch)(PyObject**, PyObject**, PyObject**) = nullptr;
    void (*PyErr_Restore)(PyObject*, PyObject*, PyObject*) = nullptr;
    void (*PyErr_Clear)() = nullptr;
    PyObject* (*PyErr_Occurred)() = nullptr;
    void (*Py_IncRef)(PyObject*) = nullptr;
    void (*Py_DecRef)(PyObject*) = nullptr;
    // Optional (allocator mode's snapshots, allocmode/torch_snapshot.cpp): checked where used.
    PyObject* (*PyList_New)(ptrdiff_t) = nullptr;
    PyObject* (*PyFloat_FromDouble)(double) = nullptr;
    PyObject* (*PyBool_FromLong)(long) = nullptr;
    void (*PyErr_SetString)(PyObject*, const char*) = nullptr;
    PyObject* exc_runtime_error = nullptr;  // PyExc_RuntimeError's value
    PyObject* none = nullptr;               // &_Py_NoneStruct
    PyObject* false_ = nullptr;             // &_Py_FalseStruct

    bool complete() const;
};

/// Resolves the table once. Returns nullptr when this process has no CPython (or an unsupported
/// version); the result never changes afterwards.
const CApi* capi();

/// Owns one reference to a PyObject (Py_DecRef through the table; GIL must be held).
class Ref {
public:
    Ref() = default;
    explicit Ref(PyObject* p) : p_(p) {}
    Ref(const Ref&) = delete;
    Ref& operator=(const Ref&) = delete;
    Ref(Ref&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
    Ref& operator=(Ref&& o) noexcept {
        reset(o.p_);
        o.p_ = nullptr;
        return *this;
    }
    ~Ref() { reset(); }
    void reset(PyObject* p = nullptr) {
        if (p_) capi()->Py_DecRef(p_);
        p_ = p;
    }
    PyObject* get() const { return p_; }
    PyObject* release() {
        PyObject* p = p_;
        p_ = nullptr;
        return p;
    }
    explicit operator bool() const { return p_ != nullptr; }

private:
    PyObject* p_ = nullptr;
};

/// Saves the thread's pending Python exception (if any) and restores it on scope exit; any
/// exception raised in between by memguard's own calls is cleared. GIL must be held.
class ErrorGuard {
public:
    ErrorGuard() { capi()->PyErr_Fetch(&type_, &value_, &tb_); }
    ~ErrorGuard() {
        if (capi()->PyErr_Occurred()) capi()->PyErr_Clear();
        capi()->PyErr_Restore(type_, value_, tb_);
    }

private:
    PyObject *type_ = nullptr, *value_ = nullptr, *tb_ = nullptr;
};

/// A new reference to None.
PyObject* new_none();
/// A builtin function object calling `def` with `self` (a new reference).
PyObject* make_function(PyMethodDef* def, PyObject* self);
/// module.attr of an already imported module (a new reference), or nullptr (an error may be set).
PyObject* module_attr(const char* module, const char* attr);

}  // namespace memguard::python
