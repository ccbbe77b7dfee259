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

/// exec(source, namespace.__dict__) for the library's embedded Python files. False on failure,
/// with the Python error left for the caller to clear.
bool run_source(PyObject* ns, const char* source);
/// A new module object: type(sys)(name); nullptr with an error set on failure.
PyObject* new_module(const char* name);

}  // namespace memguard::python
