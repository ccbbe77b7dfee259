"""Python stacks through the GIL-free path's caches (src/python/pystack.cpp) stay exact.

The frame walker's results are cached by (code address, instruction offset) and by whole raw
stack, and no reference can be held on a code object without the GIL: a freed code object's
address is soon taken by the next one of the same size. Each allocation below has its own size
and the child records the stack it expects (function, filename, line, innermost first); every
A record's stack must match it:
  two_lasti   one function allocating from two lines (one code object, two offsets), 3 rounds;
  shifted     generated functions compiled from the same text shifted down by N lines;
  inner       the same first line and a line table of the same length (blank lines inside);
  filename    the same text under filenames of the same length and different text;
  callers     one allocating function reached from two callers, and from two lines of one caller
              (stacks alike but for frame 2);
  recursion   20, 21 and 200 frames of one recursive function (the walker keeps 128);
  threads     8 threads allocating from two lines each, at once;
  fork        a site warmed in the parent, then used in a fork child: the child's report must
              define its own P and p records (the caches start over with the report).
The reuse scenarios also record the addresses, and the driver checks that the address reuse the
cache must survive really happened (else the scenario would prove nothing).
Only on CPython 3.11 to 3.13 (the GIL-free walker); skipped elsewhere.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

GIL_FREE_LINE = "Python stacks on allocations: from every thread with Python frames"
BASE = 1 << 20
GEN_FILE = "<memguard generated>"
# The address reuse each scenario needs, between the previous and the current function generated
# at one code address ([code id, line table id, its length, first line, line, filename]).
REUSED = {
    "shifted": lambda p, c: p[0] == c[0] and p[4] != c[4],
    # Same code address, same line table object and length, same first line: only the bytes differ.
    "inner": lambda p, c: p[:4] == c[:4] and p[4] != c[4],
    "filename": lambda p, c: p[0] == c[0] and p[5] != c[5],
}
GEN_TEXT = "def gen(mf, size):\n    x = 1\n{}    mf(size)\n    mf(size + 128)\n"


def child(arm):
    import ctypes
    import threading

    ctypes.CDLL(arm["fake_cudart"])
    lib = ctypes.CDLL(None)  # releases the GIL: the frame walker runs
    lib.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    lib.cudaFree.argtypes = [ctypes.c_void_p]
    here = os.path.abspath(__file__)
    out = {"expect": {}, "reuse": {}, "errors": []}
    counter = iter(range(1, 1 << 20))
    lock = threading.Lock()

    def new_size():
        with lock:
            return BASE + 256 * next(counter)

    def mf(size):
        p = ctypes.c_void_p()
        rc = lib.cudaMalloc(ctypes.byref(p), size)
        if rc != 0:
            out["errors"].append(f"cudaMalloc({size}) = {rc}")
        lib.cudaFree(p)

    mf_line = mf.__code__.co_firstlineno + 2

    def expect(scenario, size, frames):
        """frames: (function, filename, line) from mf's caller outwards."""
        out["expect"][str(size)] = {"scenario": scenario, "frames": [["mf", here, mf_line]] + [list(f) for f in frames]}

    def line_of(offset=0):
        return sys._getframe(1).f_lineno + offset

    # two_lasti
    def two_lasti(s1, s2):
        mf(s1); l1 = line_of()  # noqa: E702
        mf(s2); l2 = line_of()  # noqa: E702
        return l1, l2

    for _ in range(3):
        s1, s2 = new_size(), new_size()
        l1, l2 = two_lasti(s1, s2)
        expect("two_lasti", s1, [("two_lasti", here, l1)])
        expect("two_lasti", s2, [("two_lasti", here, l2)])

    # shifted / inner / filename: one generated function at a time, dropped before the next.
    def compiled(text, filename):
        scope = {}
        exec(compile(text, filename, "exec"), scope)
        return scope.pop("gen")

    def generated(scenario, variants, make, line_in, reused):
        """48 generated functions, then more (up to 400) until the address reuse that `reused`
        (previous, current) describes happened twice: where CPython's allocator puts the next
        code object and line table varies from run to run."""
        seen, last, hits = [], {}, 0
        for i in range(400):
            if i >= 48 and hits >= 2:
                break
            v = variants[i % len(variants)]
            gen = make(v)
            # Called from two lines, and allocating from two lines: the first allocation finds its
            # stack and frame stale and renews what is known of the code address, which must not
            # make a later allocation's stale stack or frame (made under the last code) look valid.
            s1, s2 = new_size(), new_size()
            gen(mf, s1); l1 = line_of()  # noqa: E702
            gen(mf, s2); l2 = line_of()  # noqa: E702
            c = gen.__code__
            seen.append([id(c), id(c.co_linetable), len(c.co_linetable), c.co_firstlineno, line_in(v), c.co_filename])
            if seen[-1][0] in last and reused(last[seen[-1][0]], seen[-1]):
                hits += 1
            last[seen[-1][0]] = seen[-1]
            for size, line in ((s1, l1), (s2, l2)):
                expect(scenario, size, [("gen", c.co_filename, line_in(v)), ("generated", here, line)])
                expect(scenario, size + 128, [("gen", c.co_filename, line_in(v) + 1), ("generated", here, line)])
            del gen, c
        out["reuse"][scenario] = seen

    generated("shifted", [0, 9, 3, 17, 5], lambda v: compiled("\n" * v + GEN_TEXT.format(""), GEN_FILE),
              lambda v: v + 3, REUSED["shifted"])
    generated("filename", [0, 1, 2, 3], lambda v: compiled(GEN_TEXT.format(""), "".join(["<gen-", str(v), ">"])),
              lambda v: 3, REUSED["filename"])
    # inner: one template's code with the line table of a variant with v blank lines before the
    # call (the same length for v in 2..19), made right after the last one died, so that both
    # the code object and its line table take their predecessors' addresses.
    import types
    template = compiled(GEN_TEXT.format("\n\n"), GEN_FILE).__code__
    tables = {v: bytes(compiled(GEN_TEXT.format("\n" * v), GEN_FILE).__code__.co_linetable).hex()
              for v in (2, 7, 4, 13, 9)}

    import random
    rng = random.Random(7)

    def inner(v):
        # Objects of the line table's size, held while it is made, vary where it lands: in some
        # runs the tables otherwise settle into two alternating addresses, never one.
        spacers = [bytes.fromhex(tables[v]) for _ in range(rng.randint(0, 2))]
        table = bytes.fromhex(tables[v])
        gen = types.FunctionType(template.replace(co_linetable=table), {})
        del spacers
        return gen

    generated("inner", [2, 7, 4, 13, 9], inner, lambda v: v + 3, REUSED["inner"])

    # callers
    def site(size):
        mf(size); return line_of()  # noqa: E702

    def caller_a(size):
        return site(size), line_of()

    def caller_b(size):
        return site(size), line_of()

    def caller_two(size, first):  # the same code object calling from two lines
        if first:
            return site(size), line_of()
        return site(size), line_of()

    for _ in range(3):
        for fn in (caller_a, caller_b):
            size = new_size()
            site_line, fn_line = fn(size)
            expect("callers", size, [("site", here, site_line), (fn.__name__, here, fn_line)])
        for first in (True, False):
            size = new_size()
            site_line, fn_line = caller_two(size, first)
            expect("callers", size, [("site", here, site_line), ("caller_two", here, fn_line)])

    # recursion
    def rec(depth, size):
        if depth == 0:
            mf(size); return line_of(), None  # noqa: E702
        leaf, _ = rec(depth - 1, size); return leaf, line_of()  # noqa: E702

    for depth in (20, 21, 200, 20, 200, 21):
        size = new_size()
        leaf, call = rec(depth, size)
        frames = [("rec", here, leaf)] + [("rec", here, call)] * depth
        expect("recursion", size, frames[:127])  # with mf: the walker's 128 frames
        out["expect"][str(size)]["complete"] = depth < 127

    # threads
    def worker(k, results):
        for j in range(200):
            s1, s2 = new_size(), new_size()
            mf(s1); l1 = line_of()  # noqa: E702
            mf(s2); l2 = line_of()  # noqa: E702
            results.append((s1, l1, s2, l2))

    results = [[] for _ in range(8)]
    threads = [threading.Thread(target=worker, args=(k, results[k])) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(8):
        for s1, l1, s2, l2 in results[k]:
            expect("threads", s1, [("worker", here, l1), ("run", None, None)])
            expect("threads", s2, [("worker", here, l2), ("run", None, None)])

    # fork: the site is cached in the parent, then used in the child
    def fork_site(size):
        mf(size); return line_of()  # noqa: E702

    for _ in range(2):
        size = new_size()
        expect("fork_parent", size, [("fork_site", here, fork_site(size))])
    child_size = new_size()
    pid = os.fork()
    if pid == 0:
        fork_site(child_size)
        ctypes.CDLL(None).exit(0)  # C exit: the child's report is flushed, Python is not finalized
    _, status = os.waitpid(pid, 0)
    out["fork"] = {"pid": pid, "status": status, "size": child_size,
                   "frames": [["mf", here, mf_line], ["fork_site", here, fork_site.__code__.co_firstlineno + 1]]}
    out["python"] = list(sys.version_info[:2])
    return out


class PythonStackCache(harness.ChildTestCase):
    @classmethod
    def setUpClass(cls):
        cls.run_ = harness.run_child(__file__, {"fake_cudart": harness.fake_cudart_path()})

    def setUp(self):
        self.assertChildOk(self.run_)
        if tuple(self.run_.result["python"]) not in ((3, 11), (3, 12), (3, 13)):
            self.skipTest("no GIL-free frame walker on this CPython")
        self.assertIn(GIL_FREE_LINE, self.run_.stderr, self.run_.describe())
        self.assertEqual(self.run_.result["errors"], [])

    def check(self, rep, size, frames, complete):
        a = [a for a in rep.A if a["size"] == size]
        self.assertEqual(len(a), 1, f"one A record of size {size}")
        self.assertNotEqual(a[0]["python_stack_id"], 0, f"size {size}: a Python stack")
        got = rep.python_stack(a[0]["python_stack_id"])
        head = [tuple(g) for g in got[:len(frames)]]
        want = [tuple(g if w is None else w for g, w in zip(head[i], frames[i])) for i in range(min(len(head), len(frames)))]
        self.assertEqual(head, want, f"size {size}: stack {got}")
        self.assertEqual(len(head), len(frames), f"size {size}: stack {got}")
        if complete:
            self.assertEqual(got[-1][0], "<module>", f"size {size}: stack {got}")
        return got

    def scenario(self, name):
        rep = self.run_.need_report()
        items = [(int(s), e) for s, e in self.run_.result["expect"].items() if e["scenario"] == name]
        self.assertGreater(len(items), 0)
        for size, e in items:
            self.check(rep, size, e["frames"], e.get("complete", False))
        return rep

    def assert_reuse(self, name):
        """Some generated function took the code address of the last one there (and whatever
        REUSED[name] also requires) while its frames differed: the case a cache keyed by address
        gets wrong."""
        seen = self.run_.result["reuse"][name]
        last, hits = {}, 0
        for s in seen:
            if s[0] in last and REUSED[name](last[s[0]], s):
                hits += 1
            last[s[0]] = s
        self.assertGreater(hits, 0, f"{name}: no code address reused with different frames; "
                                         f"the scenario proves nothing: {seen}")

    def test_two_lasti(self):
        self.scenario("two_lasti")

    def test_shifted(self):
        self.scenario("shifted")
        self.assert_reuse("shifted")

    def test_inner(self):
        self.scenario("inner")
        self.assert_reuse("inner")

    def test_filename(self):
        self.scenario("filename")
        self.assert_reuse("filename")

    def test_callers(self):
        self.scenario("callers")

    def test_recursion(self):
        rep = self.scenario("recursion")
        for size, e in self.run_.result["expect"].items():
            if e["scenario"] == "recursion" and not e["complete"]:
                a = [a for a in rep.A if a["size"] == int(size)][0]
                self.assertEqual(len(rep.python_stack(a["python_stack_id"])), 128)

    def test_threads(self):
        self.scenario("threads")

    def test_fork(self):
        self.scenario("fork_parent")
        f = self.run_.result["fork"]
        self.assertEqual(f["status"], 0)
        mine = [r for r in self.run_.reports if f".{f['pid']}.mgr" in os.path.basename(r)]
        self.assertEqual(len(mine), 1, f"the fork child's report: {self.run_.reports}")
        self.check(harness.Report(mine[0]), f["size"], [tuple(x) for x in f["frames"]], True)


if __name__ == "__main__":
    harness.main(child)
