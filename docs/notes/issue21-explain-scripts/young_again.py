"""Can the saved garbage be freed by a gen-0 collection instead of a second full one? Untrack and
track each saved object again (C API; here through ctypes): it joins generation 0."""
import ctypes, gc, sys, time, weakref
untrack = ctypes.pythonapi.PyObject_GC_UnTrack; untrack.argtypes = [ctypes.py_object]; untrack.restype = None
track = ctypes.pythonapi.PyObject_GC_Track; track.argtypes = [ctypes.py_object]; track.restype = None
class Node:
    def __init__(self): self.me = self; self.payload = bytearray(1 << 20)
heap = [{"i": i, "l": [i]} for i in range(100_000)]
gc.collect()
x = Node(); probe = weakref.ref(x.payload) if False else None
ids = []
for _ in range(3):
    n = Node(); ids.append(id(n)); del n
old = gc.get_debug(); gc.set_debug(gc.DEBUG_SAVEALL)
t0 = time.perf_counter(); gc.collect(); t1 = time.perf_counter(); gc.set_debug(old)
g = gc.garbage[:]; del gc.garbage[:]
for o in g:
    if gc.is_tracked(o):
        untrack(o); track(o)
t2 = time.perf_counter()
print("python", sys.version.split()[0], "saved", len(g), "in gen0:", sum(any(o is y for y in gc.get_objects(0)) for o in g))
del g, o
t3 = time.perf_counter(); n0 = gc.collect(0); t4 = time.perf_counter()
alive = {id(o) for o in gc.get_objects()}
print(f"saving full collection {(t1-t0)*1e3:.1f} ms; re-track {(t2-t1)*1e3:.2f} ms; gen-0 collection freed {n0} in {(t4-t3)*1e3:.2f} ms; "
      f"planted still tracked: {sum(i in alive for i in ids)}")
