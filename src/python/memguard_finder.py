# The import hook of memguard's Python module, run by libmemguard.so (src/python/module.cpp) in a
# private namespace that holds `_make` (creates the module from memguard.py). `_memguard` is always
# memguard's. `memguard` is memguard's unless another finder on sys.meta_path (the path finder:
# sys.path; an editable install's finder) has a module or regular package of that name (that one
# is imported, as without memguard); a bare directory named memguard (a namespace package, say the
# source checkout) does not shadow it. Embedded into the library at build time (embed_text.cmake).
import sys


class MemguardFinder:
    """Imports memguard's in-process module (libmemguard.so is preloaded)."""
    names = ("memguard", "_memguard")
    module = None

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if path is not None or fullname not in cls.names:
            return None
        from importlib.machinery import ModuleSpec
        if fullname == "memguard":
            for finder in sys.meta_path:  # the path finder, and any other (say an editable install's)
                find = getattr(finder, "find_spec", None) if finder is not cls else None
                try:
                    real = find(fullname, None) if find else None
                except Exception:
                    continue
                if real is not None and real.loader is not None and real.origin not in (None, "namespace"):
                    return None
        return ModuleSpec(fullname, cls, origin="libmemguard.so")

    @classmethod
    def create_module(cls, spec):
        if cls.module is None:
            cls.module = _make()
        return cls.module

    @staticmethod
    def exec_module(module):
        pass


_at = next((i for i, f in enumerate(sys.meta_path) if getattr(f, "__name__", "") == "PathFinder"), len(sys.meta_path))
sys.meta_path.insert(_at, MemguardFinder)
