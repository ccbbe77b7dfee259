"""Facts about gc.DEBUG_SAVEALL for memguard's 'what held it' (issue 21). Runs on 3.10-3.13, torch optional."""
import gc, sys, weakref, time
print("python", sys.version.split()[0])
log = []

class Fin:
    def __init__(self, name): self.name = name; self.me = self
    def __del__(self): log.append(("del", self.name))

def cb(r): log.append(("weakref-cb",))

# 1. When do finalizers and weakref callbacks run under SAVEALL? Are weakrefs cleared?
a = Fin("a"); w = weakref.ref(a, cb); del a
old = gc.get_debug(); n0 = len(gc.garbage)
gc.set_debug(old | gc.DEBUG_SAVEALL)
n = gc.collect()
gc.set_debug(old)
saved = gc.garbage[n0:]
print("1. collected", n, "saved", len(saved), "types", sorted({type(o).__name__ for o in saved}))
print("   log after the saving collection:", log, " weakref alive:", w() is not None)
del saved
del gc.garbage[n0:]
log.clear()
n2 = gc.collect()
print("   second collection collected", n2, "log:", log, "(no second __del__)")

# 2. Resurrection by __del__: the resurrected object is not in the garbage
keep = []
class Res:
    def __init__(self): self.me = self
    def __del__(self): keep.append(self)
r = Res(); del r
gc.set_debug(old | gc.DEBUG_SAVEALL); gc.collect(); gc.set_debug(old)
print("2. resurrected in keep:", len(keep), " Res in gc.garbage:", sum(type(o) is Res for o in gc.garbage))
del gc.garbage[:]; keep.clear(); gc.collect()

# 3. Which generation does the saved garbage go to? (a gen-0 collection after dropping frees it?)
class Node:
    def __init__(self): self.me = self
x = Node(); xr = weakref.ref(x); del x
gc.set_debug(old | gc.DEBUG_SAVEALL); gc.collect(2); gc.set_debug(old)
del gc.garbage[:]
gc.collect(0); print("3. after full SAVEALL collect, dropped, then gc.collect(0): freed", xr() is None, "(weakref already cleared:", "yes)")
x = Node(); ids = id(x); del x
gc.set_debug(old | gc.DEBUG_SAVEALL); gc.collect(0); gc.set_debug(old)
objs = [o for o in gc.garbage if id(o) == ids]
del gc.garbage[:]
in_gen = [g for g in range(3) if any(o is objs[0] for o in gc.get_objects(g))] if sys.version_info >= (3, 8) else "?"
print("   after a gen-0 SAVEALL collect the saved object sits in generation", in_gen)
del objs; gc.collect()

# 4. The frame locals, cells, functions: what get_referents gives
def make_cycle():
    big = bytearray(10)
    def inner(): return big, inner
    f = sys._getframe()
    return f
f = make_cycle(); fid = id(f); del f
gc.set_debug(old | gc.DEBUG_SAVEALL); gc.collect(); gc.set_debug(old)
g = list(gc.garbage); del gc.garbage[:]
print("4. planted frame cycle garbage types:", sorted(type(o).__name__ for o in g))
fr = [o for o in g if type(o).__name__ == "frame"][0]
print("   frame referents:", sorted(type(o).__name__ for o in gc.get_referents(fr)))
print("   frame f_locals keys:", sorted(fr.f_locals), "f_code:", fr.f_code.co_name, fr.f_lineno)
del g, fr; gc.collect()

# 5. callbacks see two collections and the collected counts twice
seen = []
def gcb(phase, info):
    if phase == "stop": seen.append(info["collected"])
gc.callbacks.append(gcb)
y = Node(); del y
gc.set_debug(old | gc.DEBUG_SAVEALL); gc.collect(); gc.set_debug(old); del gc.garbage[:]; gc.collect()
gc.callbacks.remove(gcb)
print("5. gc.callbacks saw collected =", seen, "(a plain collection: one callback, collected 1)")
