"""Does DEBUG_SAVEALL set inside a gc.callbacks 'start' callback take effect for that same collection?"""
import gc, sys
class N:
    def __init__(self): self.me = self
def cb(phase, info):
    if phase == "start": gc.set_debug(gc.DEBUG_SAVEALL)
    else: gc.set_debug(0)
gc.collect(); gc.callbacks.append(cb)
n = N(); del n
gc.collect(); gc.callbacks.remove(cb)
print("python", sys.version.split()[0], "saved by that collection:", sum(type(o) is N for o in gc.garbage))
