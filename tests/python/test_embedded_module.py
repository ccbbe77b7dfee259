"""The memguard module as imported under the library is src/python/memguard.py, and its import hook
src/python/memguard_finder.py: both are embedded into libmemguard.so at build time, so what runs
must be the file's text. The module's docstring is the file's, and each function and class the
file defines exists with the same kind, defined at the same line (line numbers of exec'd text say
which text ran). The import hook's finder is likewise the file's.
"""
import ast
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "python")


def _code_lines(obj):
    """name -> first line of each function (methods included, as Class.name) under obj."""
    import inspect
    out = {}
    for name, value in vars(obj).items():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if inspect.isfunction(value):
            out[name] = value.__code__.co_firstlineno
        elif inspect.isclass(value) and value.__module__ in (obj.__name__, getattr(obj, "__name__", None)):
            for mname, mline in _code_lines(value).items():
                out[f"{name}.{mname}"] = mline
    return out


def child(arm):
    import memguard
    finder = next(f for f in sys.meta_path if getattr(f, "__name__", "") == "MemguardFinder")
    return {"doc": memguard.__doc__, "module": _code_lines(memguard), "finder": _code_lines(finder)}


def _first_line(node):
    """co_firstlineno of the function a def makes: its first decorator's line, if any."""
    return node.decorator_list[0].lineno if node.decorator_list else node.lineno


def _file_defs(path):
    """name -> first line of each def in the file (module level, and in classes as Class.name)."""
    tree = ast.parse(open(path).read())
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    out = {}
    for node in tree.body:
        if isinstance(node, defs):
            out[node.name] = _first_line(node)
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, defs):
                    out[f"{node.name}.{sub.name}"] = _first_line(sub)
    return tree, out


class EmbeddedModule(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        cls.run_ = harness.run_child(__file__, {})

    def test_the_module_is_memguard_py(self):
        self.assertChildOk(self.run_)
        tree, defs = _file_defs(os.path.join(SRC, "memguard.py"))
        self.assertTrue(defs)
        self.assertEqual(self.run_.result["doc"], ast.get_docstring(tree, clean=False))
        self.assertEqual(self.run_.result["module"], defs)

    def test_the_import_hook_is_memguard_finder_py(self):
        self.assertChildOk(self.run_)
        _, defs = _file_defs(os.path.join(SRC, "memguard_finder.py"))
        finder = {k.split(".", 1)[1]: v for k, v in defs.items() if k.startswith("MemguardFinder.")}
        self.assertTrue(finder)
        self.assertEqual(self.run_.result["finder"], finder)


if __name__ == "__main__":
    harness.main(child)
