// The `memguard` Python module (phases and marks from Python), made importable by the embedded
// hook without any file on sys.path: an import hook (a meta-path finder placed before the path
// finder) creates it from libmemguard.so on `import memguard` or `import _memguard`.
//
// `_memguard` is always memguard's. `memguard` is too, unless another import finder (sys.path, an
// editable install) has a module or regular package of that name: that one is imported, exactly as
// without memguard (a namespace package, i.e. a bare directory named memguard, does not count). The module's functions call
// the recorder directly; the C API functions are the same calls.
#pragma once

#include "python/capi.h"

namespace memguard::python {

/// From the hook's start-up (GIL held, interpreter running).
void install_module();

/// Adds the module's native functions (_begin, _step, ...) to module object `mod`.
bool add_natives(PyObject* mod);
/// Adds `count` native functions of `defs` to module object `mod` (their definitions outlive it).
bool add_methods(PyObject* mod, PyMethodDef* defs, size_t count);
/// exec(source, ns.__dict__). False with the error set on failure.
bool run_source(PyObject* ns, const char* source);
/// A new module object: type(sys)(name) (a new reference), not put in sys.modules.
PyObject* new_module(const char* name);

}  // namespace memguard::python
