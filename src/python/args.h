// Reading the arguments of memguard's native functions (the memguard module's and the torch
// side's) with the C API memguard resolves at run time (capi.h). GIL held.
#pragma once

#include <cstddef>

#include "python/capi.h"

namespace memguard::python {

/// A new int object.
PyObject* new_long(long long v);
/// Item i of tuple t as a long long; `fallback` for None; false with an error set when not an int.
bool item_ll(PyObject* t, ptrdiff_t i, long long& out, long long fallback = -1);
/// Item i of tuple t as UTF-8 (valid while t lives); nullptr for None when `none_ok` (no error),
/// else nullptr with an error set when it is not a str.
const char* item_str(PyObject* t, ptrdiff_t i, bool none_ok = false);
/// True when tuple t has n items; else false with IndexError set (the C API memguard resolves
/// has no PyErr_SetString: reading past the end sets the error).
bool has_size(PyObject* t, ptrdiff_t n);
/// The arguments as n long longs (None: -1); false with an error set otherwise.
bool ll_args(PyObject* args, long long* out, ptrdiff_t n);

}  // namespace memguard::python
