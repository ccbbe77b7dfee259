#include "python/capi.h"

#include <cstdlib>
#include <dlfcn.h>

namespace memguard::python {
namespace {

template <typename Fn>
void resolve(Fn& slot, const char* name) {
    slot = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

CApi* load() {
    auto* api = new CApi();
    resolve(api->Py_GetVersion, "Py_GetVersion");
    resolve(api->Py_IsInitialized, "Py_IsInitialized");
    if (!api->Py_GetVersion || !api->Py_IsInitialized) return api;
    // "3.12.3 (main, ...)"
    const char* v = api->Py_GetVersion();
    if (v[0] != '3' || v[1] != '.') return api;
    api->minor = std::atoi(v + 2);
    resolve(api->Py_IsFinalizing, "Py_IsFinalizing");
    if (!api->Py_IsFinalizing) resolve(api->Py_IsFinalizing, "_Py_IsFinalizing");
    resolve(api->PyGILState_Check, "PyGILState_Check");
    resolve(api->PySys_AddAuditHook, "PySys_AddAuditHook");
    resolve(api->PyEval_SetProfile, "PyEval_SetProfile");
    resolve(api->PyEval_GetFrame, "PyEval_GetFrame");
    resolve(api->PyFrame_GetCode, "PyFrame_GetCode");
    resolve(api->PyFrame_GetBack, "PyFrame_GetBack");
    resolve(api->PyFrame_GetLineNumber, "PyFrame_GetLineNumber");
    resolve(api->PyFrame_GetLasti, "PyFrame_GetLasti");
    resolve(api->PyCode_GetCode, "PyCode_GetCode");
    resolve(api->PyBytes_AsString, "PyBytes_AsString");
    resolve(api->PyBytes_Size, "PyBytes_Size");
    resolve(api->PyImport_GetModule, "PyImport_GetModule");
    resolve(api->PyImport_ImportModule, "PyImport_ImportModule");
    resolve(api->PyObject_GetAttrString, "PyObject_GetAttrString");
    resolve(api->PyObject_SetAttrString, "PyObject_SetAttrString");
    resolve(api->PyObject_Call, "PyObject_Call");
    resolve(api->PyObject_CallObject, "PyObject_CallObject");
    resolve(api->PyObject_IsTrue, "PyObject_IsTrue");
    resolve(api->PyObject_Str, "PyObject_Str");
    resolve(api->PyCFunction_NewEx, "PyCFunction_NewEx");
    resolve(api->PyUnicode_AsUTF8, "PyUnicode_AsUTF8");
    resolve(api->PyUnicode_FromString, "PyUnicode_FromString");
    resolve(api->PyLong_AsLong, "PyLong_AsLong");
    resolve(api->PyLong_AsLongLong, "PyLong_AsLongLong");
    resolve(api->PyLong_FromLongLong, "PyLong_FromLongLong");
    resolve(api->PyLong_FromUnsignedLongLong, "PyLong_FromUnsignedLongLong");
    resolve(api->PyDict_New, "PyDict_New");
    resolve(api->PyDict_SetItemString, "PyDict_SetItemString");
    resolve(api->PyGILState_GetThisThreadState, "PyGILState_GetThisThreadState");
    resolve(api->PyGILState_Ensure, "PyGILState_Ensure");
    resolve(api->PyGILState_Release, "PyGILState_Release");
    resolve(api->PyList_Size, "PyList_Size");
    resolve(api->PyList_GetItem, "PyList_GetItem");
    resolve(api->PyObject_GC_Track, "PyObject_GC_Track");
    resolve(api->PyObject_GC_UnTrack, "PyObject_GC_UnTrack");
    resolve(api->PyObject_GC_IsTracked, "PyObject_GC_IsTracked");
    resolve(api->PyDict_GetItemString, "PyDict_GetItemString");
    resolve(api->PyTuple_Size, "PyTuple_Size");
    resolve(api->PyTuple_GetItem, "PyTuple_GetItem");
    resolve(api->PyTuple_New, "PyTuple_New");
    resolve(api->PyTuple_SetItem, "PyTuple_SetItem");
    resolve(api->PyList_Append, "PyList_Append");
    resolve(api->PyErr_Fetch, "PyErr_Fetch");
    resolve(api->PyErr_Restore, "PyErr_Restore");
    resolve(api->PyErr_Clear, "PyErr_Clear");
    resolve(api->PyErr_Occurred, "PyErr_Occurred");
    resolve(api->Py_IncRef, "Py_IncRef");
    resolve(api->Py_DecRef, "Py_DecRef");
    resolve(api->PyList_New, "PyList_New");
    resolve(api->PyFloat_FromDouble, "PyFloat_FromDouble");
    resolve(api->PyBool_FromLong, "PyBool_FromLong");
    resolve(api->PyErr_SetString, "PyErr_SetString");
    if (auto** exc = static_cast<PyObject**>(dlsym(RTLD_DEFAULT, "PyExc_RuntimeError"))) api->exc_runtime_error = *exc;
    api->none = static_cast<PyObject*>(dlsym(RTLD_DEFAULT, "_Py_NoneStruct"));
    api->false_ = static_cast<PyObject*>(dlsym(RTLD_DEFAULT, "_Py_FalseStruct"));
    return api;
}

}  // namespace

bool CApi::complete() const {
    const void* required[] = {
        reinterpret_cast<const void*>(Py_IsFinalizing),
        reinterpret_cast<const void*>(PyGILState_Check),
        reinterpret_cast<const void*>(PySys_AddAuditHook),
        reinterpret_cast<const void*>(PyEval_SetProfile),
        reinterpret_cast<const void*>(PyEval_GetFrame),
        reinterpret_cast<const void*>(PyFrame_GetCode),
        reinterpret_cast<const void*>(PyFrame_GetBack),
        reinterpret_cast<const void*>(PyFrame_GetLineNumber),
        reinterpret_cast<const void*>(PyImport_GetModule),
        reinterpret_cast<const void*>(PyImport_ImportModule),
        reinterpret_cast<const void*>(PyObject_GetAttrString),
        reinterpret_cast<const void*>(PyObject_SetAttrString),
        reinterpret_cast<const void*>(PyObject_Call),
        reinterpret_cast<const void*>(PyObject_CallObject),
        reinterpret_cast<const void*>(PyObject_IsTrue),
        reinterpret_cast<const void*>(PyObject_Str),
        reinterpret_cast<const void*>(PyCFunction_NewEx),
        reinterpret_cast<const void*>(PyUnicode_AsUTF8),
        reinterpret_cast<const void*>(PyUnicode_FromString),
        reinterpret_cast<const void*>(PyLong_AsLong),
        reinterpret_cast<const void*>(PyLong_AsLongLong),
        reinterpret_cast<const void*>(PyDict_GetItemString),
        reinterpret_cast<const void*>(PyTuple_Size),
        reinterpret_cast<const void*>(PyTuple_GetItem),
        reinterpret_cast<const void*>(PyTuple_New),
        reinterpret_cast<const void*>(PyTuple_SetItem),
        reinterpret_cast<const void*>(PyList_Append),
        reinterpret_cast<const void*>(PyErr_Fetch),
        reinterpret_cast<const void*>(PyErr_Restore),
        reinterpret_cast<const void*>(PyErr_Clear),
        reinterpret_cast<const void*>(PyErr_Occurred),
        reinterpret_cast<const void*>(Py_IncRef),
        reinterpret_cast<const void*>(Py_DecRef),
        none,
        false_,
    };
    for (const void* p : required) {
        if (!p) return false;
    }
    return minor >= 10 && minor <= 14;
}

const CApi* capi() {
    static const CApi* api = load();
    return api;
}

PyObject* new_none() {
    capi()->Py_IncRef(capi()->none);
    return capi()->none;
}

PyObject* make_function(PyMethodDef* def, PyObject* self) { return capi()->PyCFunction_NewEx(def, self, nullptr); }

PyObject* module_attr(const char* module, const char* attr) {
    const CApi* a = capi();
    Ref name(a->PyUnicode_FromString(module));
    Ref mod(name ? a->PyImport_GetModule(name.get()) : nullptr);
    if (!mod) return nullptr;
    return a->PyObject_GetAttrString(mod.get(), attr);
}

}  // namespace memguard::python
