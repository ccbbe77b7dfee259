# Facts issue 20's library side relies on, checked on the GPU machine's torch (not a test).
import time, gc, sys, torch
print("torch", torch.__version__, "python", sys.version.split()[0])
print("lazy_call", hasattr(torch.cuda, "_lazy_call"), "backend", torch.cuda.memory.get_allocator_backend() if hasattr(torch.cuda.memory, "get_allocator_backend") else "?")
seen = []
def obs(device, alloc, limit, free):
    t0 = time.perf_counter(); snap = torch.cuda.memory._snapshot(); t1 = time.perf_counter()
    st = torch.cuda.memory_stats(device)
    nblocks = sum(len(s["blocks"]) for s in snap["segments"])
    seen.append((device, alloc, limit, free, st["allocated_bytes.all.current"], st["reserved_bytes.all.current"], len(snap["segments"]), nblocks, (t1 - t0) * 1e3, torch.cuda.mem_get_info(device)))
torch.cuda._lazy_call(lambda: torch._C._cuda_attach_out_of_memory_observer(obs))
torch.cuda.init()
total = torch.cuda.get_device_properties(0).total_memory
torch.cuda.set_per_process_memory_fraction(0.02)
print("total", total, "fraction limit", int(0.02 * total))
m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
total_loss = 0
try:
    for i in range(10000):
        x = torch.randn(512, 1024, device="cuda")
        loss = m(x).square().mean()
        total_loss += loss
except torch.OutOfMemoryError as e:
    print("OOM after", i, "iterations:", str(e).splitlines()[0][:200])
print("observer calls", len(seen))
for s in seen[:3]:
    print("  device alloc limit free alloc_cur reserved segs blocks snap_ms mem_get_info:", s)
# saved tensors on 2.11
n = total_loss.grad_fn
names = [a for a in dir(n) if a.startswith("_raw_saved_") or a.startswith("_saved_")]
print("node", type(n).__name__, names[:6])
mm = m[0](torch.randn(4, 1024, device="cuda", requires_grad=True)).grad_fn
raw = [a for a in dir(mm) if a.startswith("_raw_saved_")]
print("addmm raw", raw, [type(getattr(mm, a)).__name__ for a in raw], [hasattr(getattr(mm, a), "data") for a in raw])
del total_loss, loss, seen; gc.collect(); torch.cuda.empty_cache(); torch.cuda.set_per_process_memory_fraction(1.0)
# snapshot cost with many blocks
keep = [torch.empty(1000 * (i % 50 + 1), device="cuda") for i in range(20000)]
for k in range(3):
    t0 = time.perf_counter(); snap = torch.cuda.memory._snapshot(); t1 = time.perf_counter()
    print("snapshot of", sum(len(s["blocks"]) for s in snap["segments"]), "blocks:", round((t1 - t0) * 1e3, 2), "ms")
# optimizer hook cost
from torch.optim.optimizer import register_optimizer_step_post_hook
model = torch.nn.Transformer(d_model=512, nhead=8, num_encoder_layers=4, num_decoder_layers=4).cuda()
opt = torch.optim.AdamW(model.parameters(), fused=True)
calls = []
register_optimizer_step_post_hook(lambda o, a, k: calls.append(1))
src = torch.randn(32, 16, 512, device="cuda")
for i in range(3):
    model(src, src).sum().backward(); opt.step(); opt.zero_grad()
torch.cuda.synchronize()
params = [p for g in opt.param_groups for p in g["params"]]
t0 = time.perf_counter()
for _ in range(20):
    tags = {}
    for p in params:
        s = p.untyped_storage(); tags[s.data_ptr()] = s.nbytes()
        if p.grad is not None: s = p.grad.untyped_storage(); tags[s.data_ptr()] = s.nbytes()
        for v in opt.state[p].values():
            if isinstance(v, torch.Tensor) and v.is_cuda: s = v.untyped_storage(); tags[s.data_ptr()] = s.nbytes()
t1 = time.perf_counter()
print("hook calls", len(calls), "params", len(params), "tags", len(tags), "tag pass ms", round((t1 - t0) / 20 * 1e3, 3))
t0 = time.perf_counter(); objs = gc.get_objects(); ts = [o for o in objs if issubclass(type(o), torch.Tensor)]; t1 = time.perf_counter()
print("gc scan", len(objs), "objects", len(ts), "tensors", round((t1 - t0) * 1e3, 1), "ms")
