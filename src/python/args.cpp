#include "python/args.h"

namespace memguard::python {

PyObject* new_long(long long v) { return capi()->PyLong_FromLongLong(v); }

bool item_ll(PyObject* t, ptrdiff_t i, long long& out, long long fallback) {
    const CApi* a = capi();
    PyObject* o = a->PyTuple_GetItem(t, i);
    if (!o) return false;
    if (o == a->none) {
        out = fallback;
        return true;
    }
    out = a->PyLong_AsLongLong(o);
    return !(out == -1 && a->PyErr_Occurred());
}

const char* item_str(PyObject* t, ptrdiff_t i, bool none_ok) {
    const CApi* a = capi();
    PyObject* o = a->PyTuple_GetItem(t, i);
    if (!o) return nullptr;
    if (none_ok && o == a->none) return nullptr;
    return a->PyUnicode_AsUTF8(o);
}

bool has_size(PyObject* t, ptrdiff_t n) {
    const CApi* a = capi();
    if (a->PyTuple_Size(t) == n) return true;
    if (!a->PyErr_Occurred()) a->PyTuple_GetItem(t, n + 1000);
    return false;
}

bool ll_args(PyObject* args, long long* out, ptrdiff_t n) {
    if (!has_size(args, n)) return false;
    for (ptrdiff_t i = 0; i < n; ++i) {
        if (!item_ll(args, i, out[i])) return false;
    }
    return true;
}

}  // namespace memguard::python
