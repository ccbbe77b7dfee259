# The interpreter's own directories, for the report's user-frame rule (docs/user-line.md): run by
# libmemguard.so (src/python/interpreter_paths.cpp) in a private namespace that holds
# `_record(kind, path)`, which writes one e record. record_start() runs once when the hook starts,
# record_torch(torch) once when torch is first seen in sys.modules. Embedded at build time
# (embed_text.cmake). Nothing here may raise into the program: every step is guarded.
import os
import sys

_seen = set()


def _add(kind, path):
    """Records `path` (absolute, and resolved when a symbolic link leads elsewhere) once."""
    if not isinstance(path, str) or not path:
        return
    try:
        named = os.path.abspath(path)
        resolved = os.path.realpath(named)
    except Exception:
        return
    for p in (named, resolved):
        if (kind, p) not in _seen:
            _seen.add((kind, p))
            _record(kind, p)


def record_start():
    """The standard library, the site directories, the prefixes and memguard's package."""
    try:
        import sysconfig
        paths = sysconfig.get_paths()
    except Exception:
        paths = {}
    for key in ("stdlib", "platstdlib"):
        _add("stdlib", paths.get(key))
    for key in ("purelib", "platlib"):
        _add("site", paths.get(key))
    try:
        import site
        for p in site.getsitepackages():
            _add("site", p)
        _add("site", site.getusersitepackages())
    except Exception:
        pass
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix):
        _add("prefix", p)
    try:
        from importlib.machinery import PathFinder
        spec = PathFinder.find_spec("memguard")
        # A regular package only: a bare directory named memguard is not the installed package.
        if spec is not None and spec.origin not in (None, "namespace"):
            for p in spec.submodule_search_locations or ():
                _add("memguard", p)
    except Exception:
        pass


def record_torch(torch):
    """torch's package directory and inductor's cache directory (as torch computes its default,
    without creating a file to probe the temporary directory as tempfile.gettempdir() would)."""
    for p in list(getattr(torch, "__path__", None) or ()):
        _add("torch", p)
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not cache:
        try:
            import getpass
            user = getpass.getuser()
        except Exception:
            user = "uid_%d" % os.getuid() if hasattr(os, "getuid") else "unknown_user"
        for c in '\\/:*?"<>|':
            user = user.replace(c, "_")
        tmp = sys.modules["tempfile"].tempdir if "tempfile" in sys.modules else None
        for name in ("TMPDIR", "TEMP", "TMP"):
            if not tmp and os.path.isdir(os.environ.get(name) or ""):
                tmp = os.environ[name]
        cache = os.path.join(tmp or "/tmp", "torchinductor_" + user)
    _add("inductor_cache", cache)
