// The `memguard` Python module (phases and marks from Python), made importable by the embedded
// hook without any file on sys.path: an import hook (a meta-path finder placed before the path
// finder) creates it from libmemguard.so on `import memguard` or `import _memguard`.
//
// `_memguard` is always memguard's. `memguard` is too, unless another import finder (sys.path, an
// editable install) has a module or regular package of that name: that one is imported, exactly as
// without memguard (a namespace package, i.e. a bare directory named memguard, does not count). The module's functions call
// the recorder directly; the C API functions are the same calls.
#pragma once

namespace memguard::python {

/// From the hook's start-up (GIL held, interpreter running).
void install_module();

}  // namespace memguard::python
