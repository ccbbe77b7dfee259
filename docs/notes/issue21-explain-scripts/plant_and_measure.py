"""Plants a frame, a closure and an autograd.Function context cycle holding tensors, in a heap of
~200k objects; times a plain full collection against an explained one; prints the explanation."""
import gc, sys, time, weakref, torch
ns = {"device_of": lambda t: 0}  # CPU tensors stand for CUDA ones
exec(open(sys.argv[1]).read(), ns)
MIB = 1 << 20

class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x * 2
        ctx.save_for_backward(x)
        return y
    @staticmethod
    def backward(ctx, g):
        return g * 2

def frame_cycle():
    act = torch.zeros(4 * MIB // 4)
    me = sys._getframe()  # the frame holds itself through its local
    return weakref.ref(act)

def closure_cycle():
    held = torch.zeros(2 * MIB // 4)
    def step():
        return held, step  # step's cell refers to step: a cycle through the closure
    return weakref.ref(held)

def ctx_cycle():
    x = torch.zeros(MIB // 4, requires_grad=True)
    y = F.apply(x)
    y.grad_fn.out = y  # ctx -> y -> grad_fn (ctx): Megatron's checkpoint kept outputs on its ctx
    return weakref.ref(x), weakref.ref(y)

def plant():
    return [frame_cycle(), closure_cycle(), *ctx_cycle()]

heap = [{"i": i, "l": [i]} for i in range(100_000)]  # ~200k tracked objects
gc.collect()
print("python", sys.version.split()[0], "torch", torch.__version__, "tracked objects", len(gc.get_objects()))

def alive_set():
    return {id(o) for o in gc.get_objects()}

# Plain
refs = plant(); t0 = time.perf_counter(); n = gc.collect(); t1 = time.perf_counter()
print(f"plain full collection: {n} collected, {(t1 - t0) * 1e3:.1f} ms, tensors freed: {[r() is None for r in refs]}")
refs = plant()
t0 = time.perf_counter(); n, e = ns["explained_collect"](gc.collect, 2, ns["ctypes_retrack"]() if len(sys.argv) > 2 else None); t1 = time.perf_counter()
print(f"explained collection (retrack={len(sys.argv) > 2}): {n} collected, {(t1 - t0) * 1e3:.1f} ms (both passes and the analysis), "
      f"tensors freed: {[r() is None for r in refs]}, gc.garbage {len(gc.garbage)}")
for line in ns["format_explanation"](e):
    print(line)
# timing of the parts
refs = plant()
old = gc.get_debug(); gc.set_debug(gc.DEBUG_SAVEALL)
t0 = time.perf_counter(); gc.collect(); t1 = time.perf_counter(); gc.set_debug(old)
g = gc.garbage[:]; del gc.garbage[:]
t2 = time.perf_counter(); ns["analyse"](g); t3 = time.perf_counter(); del g
t4 = time.perf_counter(); gc.collect(); t5 = time.perf_counter()
print(f"parts: saving collection {(t1-t0)*1e3:.1f} ms, analysis {(t3-t2)*1e3:.1f} ms, freeing collection {(t5-t4)*1e3:.1f} ms")
